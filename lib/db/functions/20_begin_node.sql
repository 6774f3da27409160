-- kiln_begin_node: a worker that claimed a check_resource job asks to work on
-- its node. One round trip, one transaction (lock order: 10_events.sql):
--
--   0. a parked node's job resumes it (kiln_resume_node)            -> 'locked'
--   1. the job's traversal must still be the stack's current one   -> else 'stale'
--   2. the node must be READY (not already taken or done)           -> else 'duplicate'
--   3. the traversal must not have failed or timed out              -> else 'skipped'
--   4. the resource row must be unlocked:
--        lease of the holder ran out -> break its lock (row FAILED), go on
--                                      (kiln_break_dead_lock)
--        held by a live worker      -> register as the row's waiter, 'blocked'
--                                      (the holder retriggers us when it lets go;
--                                      a delete too: see below)
--   5. lock it (engine_id, lease, atomic_key+1), node RUNNING        -> 'locked'
--      (kiln_lock_node_row; its reply: kiln_locked_reply)
--
-- Terminal outcomes delete the job; 'locked' keeps it until kiln_finish_node.
--
-- kiln_begin_core does the work without emitting, so that a finish, a
-- replacement or a claim can begin a node in its own transaction and publish
-- everything once. With p_nowait it never waits for a lock (the caller
-- already holds later locks of the lock order): whatever would wait answers
-- 'later', changes nothing, and the job stays claimed for a plain begin.
-- It returns { result, events, settle } where settle names a traversal that
-- may have ended (kiln_settle, run by the caller after commit).
--
-- The steps it shares with other operations are functions of their own, each
-- in the file named after it: kiln_resume_node (26_resume_node.sql),
-- kiln_break_dead_lock (17_break_dead_lock.sql), kiln_lock_node_row
-- (21_lock_node_row.sql), kiln_locked_reply (19_locked_reply.sql).

CREATE OR REPLACE FUNCTION kiln_begin_core(p_job bigint, p_worker uuid, p_lease_ms int, p_nowait boolean) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  j job%ROWTYPE;
  s stack%ROWTYPE;
  t traversal%ROWTYPE;
  sp sync_point%ROWTYPE;
  r resource%ROWTYPE;
  v_key int;
  v_lock jsonb;
  v_events jsonb := '[]';
  v_node jsonb;
  v_row_found boolean;
  v_later CONSTANT jsonb := '{"result": {"outcome": "later"}, "events": []}';
BEGIN
  SELECT * INTO j FROM job WHERE id = p_job;
  IF NOT FOUND OR j.locked_by IS DISTINCT FROM p_worker THEN
    RETURN jsonb_build_object('result', jsonb_build_object('outcome', 'gone'), 'events', '[]'::jsonb);
  END IF;
  -- Node steps share the stack row; a traversal start, a settle or a sweep
  -- (which take it exclusively) waits for them and they for it.
  IF p_nowait THEN
    SELECT * INTO s FROM stack WHERE id = j.stack_id FOR SHARE SKIP LOCKED;
    IF NOT FOUND AND EXISTS (SELECT 1 FROM stack WHERE id = j.stack_id) THEN RETURN v_later; END IF;
  ELSE
    SELECT * INTO s FROM stack WHERE id = j.stack_id FOR SHARE;
  END IF;
  IF j.park IS NOT NULL AND s.id IS NOT NULL THEN
    -- A parked node, woken (25_park.sql): it holds its row whatever became of its traversal.
    v_lock := kiln_resume_node(j, s, p_worker, p_lease_ms, p_nowait);
    IF v_lock IS NOT NULL THEN RETURN v_lock; END IF;
  END IF;
  IF s.id IS NULL OR s.current_traversal_id IS DISTINCT FROM j.traversal_id THEN
    DELETE FROM job WHERE id = p_job;
    RETURN jsonb_build_object('result', jsonb_build_object('outcome', 'stale', 'current_traversal_id', s.current_traversal_id), 'events', '[]'::jsonb);
  END IF;

  SELECT * INTO t FROM traversal WHERE id = j.traversal_id;
  v_key := coalesce(j.graph_key_id, j.resource_id);
  v_node := jsonb_build_object('rid', v_key, 'update', j.is_update);

  -- The row, then the node's sync point (lock order 2, 3): two jobs for one
  -- node (a requeue racing the original) queue here, and the second sees RUNNING.
  IF p_nowait THEN
    SELECT * INTO r FROM resource WHERE id = j.resource_id FOR UPDATE SKIP LOCKED;
    v_row_found := FOUND;
    IF NOT v_row_found AND EXISTS (SELECT 1 FROM resource WHERE id = j.resource_id) THEN RETURN v_later; END IF;
    SELECT * INTO sp FROM sync_point WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update FOR UPDATE SKIP LOCKED;
    IF NOT FOUND AND EXISTS (SELECT 1 FROM sync_point WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update) THEN
      RETURN v_later;
    END IF;
  ELSE
    SELECT * INTO r FROM resource WHERE id = j.resource_id FOR UPDATE;
    v_row_found := FOUND;
    SELECT * INTO sp FROM sync_point WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update FOR UPDATE;
  END IF;

  IF sp.state = 'RUNNING' AND sp.actor_id = j.resource_id AND r.engine_id = p_worker AND r.lock_traversal_id = j.traversal_id THEN
    -- A retry of a call that committed but whose reply was lost, or a step lost
    -- in a database crash (a lazy commit) whose job the worker gave back: answer
    -- as before. The row's state before that begin is not kept; a create it
    -- started is still a create (retried in place: physical names are stable per
    -- row), not an update of a row that was never made.
    RETURN jsonb_build_object('result', kiln_locked_reply('locked',
      to_jsonb(r) || CASE WHEN r.action = 'CREATE' AND r.status = 'IN_PROGRESS' AND r.properties IS NULL
                          THEN '{"action": "INIT", "status": "COMPLETE"}'::jsonb ELSE '{}' END,
      s, t, v_key, j.is_update), 'events', '[]'::jsonb);
  END IF;
  IF sp.state IS DISTINCT FROM 'READY' OR (sp.actor_id IS NOT NULL AND sp.actor_id <> j.resource_id) THEN
    DELETE FROM job WHERE id = p_job;
    RETURN jsonb_build_object('result', jsonb_build_object('outcome', 'duplicate', 'state', sp.state), 'events', '[]'::jsonb);
  END IF;

  IF t.failure_reason IS NULL AND t.deadline < now() THEN
    -- The traversal row comes after the sync points in the lock order; a
    -- begin that must not wait leaves the time-out to a plain begin.
    IF p_nowait THEN RETURN v_later; END IF;
    UPDATE traversal SET failure_reason = 'Timed out' WHERE id = t.id AND failure_reason IS NULL;
    IF FOUND THEN
      v_events := v_events || kiln_ev('stack', t.id, NULL, NULL, NULL, t.action, 'IN_PROGRESS', 'Timed out', jsonb_build_object('failing', true));
    END IF;
    SELECT * INTO t FROM traversal WHERE id = t.id;
  END IF;

  IF t.failure_reason IS NOT NULL OR NOT v_row_found THEN
    -- Failure policy: once a node failed, nothing new is started.
    IF NOT v_row_found AND t.failure_reason IS NULL THEN
      IF p_nowait THEN RETURN v_later; END IF;
      UPDATE traversal SET failure_reason = 'resource row ' || j.resource_id || ' vanished' WHERE id = t.id AND failure_reason IS NULL;
    END IF;
    UPDATE sync_point SET state = 'SKIPPED', updated_at = now()
     WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update;
    DELETE FROM job WHERE id = p_job;
    v_events := v_events || kiln_ev('node', t.id, j.resource_id, r.name, NULL, NULL, NULL, 'skipped: the traversal is failing',
                                    v_node || jsonb_build_object('state', 'SKIPPED'));
    RETURN jsonb_build_object('result', jsonb_build_object('outcome', 'skipped'), 'events', v_events, 'settle', t.id);
  END IF;

  IF r.engine_id IS NOT NULL AND r.lease_expires_at < now() THEN
    -- The holder stopped heartbeating: break its lock. The row can no longer be
    -- trusted (the action may have half happened), so it is FAILED (unless it
    -- was already deleted: kiln_status_after_dead_holder); an update node
    -- replaces it, a cleanup node deletes it. Its waiter stays, for this
    -- node's finish to retrigger.
    v_events := v_events || kiln_break_dead_lock(r, false);
    SELECT * INTO r FROM resource WHERE id = r.id;
  END IF;

  IF r.engine_id IS NOT NULL THEN
    -- Held by a live worker of an older traversal: stop here. The holder
    -- retriggers this node when it lets go (kiln_retrigger_waiter). A newer
    -- traversal's node overwrites an older waiter: only the newest matters.
    -- An update node waits for a delete it will undo too (as Heat does): the
    -- deleted row is then replaced. A replacement made beside the running
    -- delete would contend with it for whatever the two share outside Kiln
    -- (a Kiln::File's path, a database's name), which the delete still holds.
    UPDATE resource SET waiter_traversal_id = j.traversal_id, waiter_is_update = j.is_update WHERE id = r.id;
    UPDATE sync_point SET state = 'BLOCKED', updated_at = now()
     WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update;
    DELETE FROM job WHERE id = p_job;
    v_events := v_events || kiln_ev('node', t.id, r.id, r.name, r.physical_id, NULL, NULL,
      'blocked: locked by an older traversal',
      v_node || jsonb_build_object('state', 'BLOCKED', 'blocked_by', r.lock_traversal_id, 'holder', r.engine_id, 'lease_expires_at', r.lease_expires_at));
    RETURN jsonb_build_object('result', jsonb_build_object('outcome', 'blocked', 'blocked_by', r.lock_traversal_id), 'events', v_events);
  END IF;

  v_lock := kiln_lock_node_row(r, s, t, v_key, j.is_update, sp, p_worker, p_lease_ms);
  RETURN jsonb_build_object('result', v_lock->'result', 'events', v_events || (v_lock->'events'));
END $$;

CREATE OR REPLACE FUNCTION kiln_begin_node(p_job bigint, p_worker uuid, p_lease_ms int) RETURNS jsonb LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_stack uuid := (SELECT stack_id FROM job WHERE id = p_job);
  v jsonb := kiln_begin_core(p_job, p_worker, p_lease_ms, false);
BEGIN
  PERFORM kiln_emit(v_stack, v->'events');
  RETURN (v->'result') || jsonb_build_object('settle', v->'settle');
END $$;
