-- Parking: a node whose action waits (a wait condition for its signals; later
-- a hook, a nested stack, a provider's long operation) gives its worker slot
-- back while it waits. A worker slot is a process's capacity; a wait that held
-- one let one tenant's 140 waiting conditions hold every slot of two workers
-- for as long as their timeouts (up to 12 hours).
--
-- A parked node keeps:
--   - its row's lock, held by no worker: engine_id = kiln_parked_holder(), no
--     lease (nothing heartbeats for it, and the sweeper breaks only expired
--     leases), lock_traversal_id its traversal. A newer traversal's node finds
--     the row locked and becomes its waiter, as with any holder;
--   - its job, unclaimed and not ready: `park` (since, until, the row's state
--     before the node began, the node's inputs), `parked_until` (when its wait
--     ends at the latest) and `wake_key` (what wakes it sooner);
--   - its sync point, RUNNING: it is in flight.
-- It is woken by
--   - kiln_wake(key): what it waits for happened (a signal was stored);
--   - kiln_wake_due(): its time is up (the sweeper, on the timer every worker
--     sets to the earliest parked_until);
--   - kiln_abort_jobs(notice): a stack delete, a preempting update, its
--     traversal timing out or failing; the job then carries `abort`.
-- Woken, its job is ready again and a worker claims it like any other; its
-- begin (kiln_resume_node) takes the row's lock over from the park and runs
-- the action again from its start, with the park's deadline and the inputs it
-- parked with (those of a superseded traversal are gone by then). The action
-- then finds what it waited for, or parks again, or fails.
--
-- A wake between the action's look and its park must not be slept through.
-- The action reads the key's count (wake.seq) before it looks; kiln_park_node
-- locks the key's wake row and parks only if the count is unchanged, and
-- kiln_wake bumps the count under the same row lock before it wakes parked
-- jobs: either the park sees the new count (and answers 'again'), or the wake
-- sees the parked job. Lock order: the wake row comes after the resource rows
-- and before the job rows it wakes; the waking side takes no other lock.

-- kiln_park_node: the worker that holds p_job's row parks the node.
-- p_park: { action, reason, until, wake_key, seen, before: {action, status,
-- status_reason}, inputs, in_progress_event }. `before` and `inputs` are kept
-- from the first park when a resumed node parks again (so are `since` and the
-- wait's own `until`, which the action passes back). The wait ends at the
-- traversal's deadline at the latest (an action's abort timer does the same).
-- Returns { outcome: parked | again | aborted | gone | lock_lost }; 'again': a
-- wake came after the action read the count, so it looks again now;
-- 'aborted' (with `reason`): the node was told to stop while its action ran
-- (kiln_abort_jobs), and a park would sleep through that.
CREATE OR REPLACE FUNCTION kiln_park_node(p_job bigint, p_worker uuid, p_park jsonb) RETURNS jsonb LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  j job%ROWTYPE;
  s stack%ROWTYPE;
  r resource%ROWTYPE;
  t traversal%ROWTYPE;
  v_key text := p_park->>'wake_key';
  v_seq bigint;
  v_action text := p_park->>'action';
  v_until timestamptz;
  v_node jsonb;
  v_events jsonb[] := '{}';
BEGIN
  SELECT * INTO j FROM job WHERE id = p_job;
  IF NOT FOUND OR j.locked_by IS DISTINCT FROM p_worker THEN RETURN jsonb_build_object('outcome', 'gone'); END IF;
  SELECT * INTO s FROM stack WHERE id = j.stack_id FOR SHARE;
  -- Read again under the stack row: a stop notice (kiln_abort_jobs) is written by a
  -- transaction that holds the stack row alone, and may have committed while we waited for it.
  SELECT * INTO j FROM job WHERE id = p_job;
  SELECT * INTO r FROM resource WHERE id = j.resource_id FOR UPDATE;
  IF NOT FOUND OR r.engine_id IS DISTINCT FROM p_worker THEN
    DELETE FROM job WHERE id = p_job;
    RETURN jsonb_build_object('outcome', 'lock_lost');
  END IF;
  IF j.abort IS NOT NULL THEN RETURN jsonb_build_object('outcome', 'aborted', 'reason', j.abort); END IF;
  -- A failing traversal stops its parked nodes (kiln_maybe_finish_failed): one about to park stops now.
  SELECT * INTO t FROM traversal WHERE id = j.traversal_id;
  IF s.current_traversal_id = j.traversal_id AND t.failure_reason IS NOT NULL THEN
    RETURN jsonb_build_object('outcome', 'aborted', 'reason', 'the stack is failing: ' || t.failure_reason);
  END IF;
  IF v_key IS NOT NULL THEN
    INSERT INTO wake (key) VALUES (v_key) ON CONFLICT (key) DO NOTHING;
    SELECT seq INTO v_seq FROM wake WHERE key = v_key FOR UPDATE;
    IF v_seq <> coalesce((p_park->>'seen')::bigint, 0) THEN RETURN jsonb_build_object('outcome', 'again'); END IF;
  END IF;
  v_until := least((p_park->>'until')::timestamptz, t.deadline);
  v_node := jsonb_build_object('rid', coalesce(j.graph_key_id, j.resource_id), 'update', j.is_update);

  IF p_park ? 'in_progress_event' THEN
    -- An update not marked UPDATE_IN_PROGRESS yet (kiln_mark_in_progress): the history shows it now.
    v_events := v_events || kiln_in_progress_ev(j.traversal_id, r, v_action, coalesce(j.graph_key_id, j.resource_id), j.is_update);
  END IF;
  UPDATE resource SET engine_id = kiln_parked_holder(), lease_expires_at = NULL,
         action = v_action, status = 'IN_PROGRESS',
         status_reason = CASE WHEN action = v_action AND status = 'IN_PROGRESS' THEN status_reason ELSE 'state changed' END,
         atomic_key = atomic_key + 1, updated_at = now()
   WHERE id = r.id RETURNING * INTO r;
  -- (a re-park drops what woke the last park: `due`)
  UPDATE job SET locked_by = NULL, locked_at = NULL, parked_until = v_until, wake_key = v_key,
         park = jsonb_build_object(
           'since', coalesce(j.park->'since', to_jsonb(now())),
           'until', to_jsonb(v_until),
           'action', v_action,
           'reason', p_park->>'reason',
           'before', coalesce(j.park->'before', p_park->'before'),
           'inputs', coalesce(j.park->'inputs', p_park->'inputs', '[]'::jsonb))
   WHERE id = p_job;
  v_events := v_events || kiln_ev('node', j.traversal_id, r.id, r.name, r.physical_id, NULL, NULL,
    'parked: ' || coalesce(p_park->>'reason', 'waiting'),
    v_node || jsonb_build_object('state', 'RUNNING', 'lock', 'parked', 'parked', true, 'until', v_until, 'wake', v_key));
  PERFORM kiln_emit(s.id, to_jsonb(v_events));
  RETURN jsonb_build_object('outcome', 'parked', 'until', v_until);
END $$;
