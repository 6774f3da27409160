-- The sweeper: what keeps a traversal from ever stalling (in Heat, a lost
-- message or a dead engine leaves the stack IN_PROGRESS forever). Every
-- worker runs it on a timer (the earliest lease or deadline, with jitter); it is
-- idempotent and serialised per stack by the stack row lock.
--
--   a. locks whose lease ran out (the holder stopped heartbeating): broken, the
--      row marked FAILED, a waiting newer node retriggered, and the holder's own
--      node re-run if its traversal is still current;
--   b. jobs claimed by workers that stopped heartbeating: returned to the queue;
--   c. traversals past their deadline: failed ('Timed out'), in-flight actions
--      told to abort (NOTIFY kiln_abort) and parked nodes woken to stop;
--   d. lost messages: READY nodes with no job, BLOCKED nodes whose row is no
--      longer locked (the retrigger went missing), RUNNING nodes whose row is
--      not locked by anyone: put back in the queue;
--   e. a traversal whose last root reported, or that failed, but whose stack
--      was not settled (the worker died between its finish and kiln_settle).

-- kiln_sweep_stack: one sweep of one stack, alone on its stack row (a-e
-- above); returns what it did: { broken, requeued, released, timed_out }.
CREATE OR REPLACE FUNCTION kiln_sweep_stack(p_stack uuid, p_lease_ms int) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  s stack%ROWTYPE;
  t traversal%ROWTYPE;
  r resource%ROWTYPE;
  sp sync_point%ROWTYPE;
  dj job%ROWTYPE;
  -- a jsonb[] (see kiln_finish_node): after a crash one sweep may requeue thousands of nodes
  v_events jsonb[] := '{}';
  v_ev jsonb;
  v_broken int := 0;
  v_requeued int := 0;
  v_released int := 0;
  v_timed_out boolean := false;
  v_lease interval := p_lease_ms * interval '1 millisecond';
  -- rows whose dead holder acted for the current traversal: their nodes run again
  v_rerun int[] := '{}';
  v_abort jsonb;
BEGIN
  SELECT * INTO s FROM stack WHERE id = p_stack FOR NO KEY UPDATE;
  IF NOT FOUND THEN RETURN '{}'; END IF;

  -- a. expired locks
  FOR r IN SELECT * FROM resource WHERE stack_id = p_stack AND engine_id IS NOT NULL AND lease_expires_at < now() ORDER BY id FOR UPDATE LOOP
    v_broken := v_broken + 1;
    v_events := v_events || kiln_break_dead_lock(r, true);
    v_ev := kiln_retrigger_waiter(s, r.id, r.waiter_traversal_id, r.waiter_is_update);
    IF v_ev IS NOT NULL THEN v_events := v_events || v_ev; v_requeued := v_requeued + 1; END IF;
    IF s.current_traversal_id IS NOT DISTINCT FROM r.lock_traversal_id THEN v_rerun := v_rerun || r.id; END IF;
  END LOOP;
  -- Re-run the holders' nodes: their jobs (claimed by the dead worker) go back
  -- to the queue. One statement for all of them: a lookup per broken lock, by
  -- traversal and row, scanned the job table each time (64 broken locks, 64
  -- sequential scans of the whole queue; test/db/plans.test.ts).
  IF cardinality(v_rerun) > 0 THEN
    FOR dj IN SELECT * FROM job WHERE stack_id = p_stack AND traversal_id = s.current_traversal_id AND resource_id = ANY(v_rerun)
                 AND kind = 'check_resource' ORDER BY id FOR UPDATE LOOP
      UPDATE job SET locked_by = NULL, locked_at = NULL WHERE id = dj.id;
      UPDATE sync_point SET state = 'READY', updated_at = now()
       WHERE traversal_id = dj.traversal_id AND resource_id = coalesce(dj.graph_key_id, dj.resource_id) AND is_update = dj.is_update
         AND state = 'RUNNING';
      v_requeued := v_requeued + 1;
    END LOOP;
  END IF;

  -- b. jobs claimed by dead workers
  FOR dj IN SELECT * FROM job j WHERE j.stack_id = p_stack AND j.locked_by IS NOT NULL AND j.locked_at < now() - v_lease
      AND NOT EXISTS (SELECT 1 FROM worker w WHERE w.id = j.locked_by AND w.stopped_at IS NULL AND w.heartbeat_at > now() - v_lease)
      FOR UPDATE LOOP
    UPDATE job SET locked_by = NULL, locked_at = NULL WHERE id = dj.id;
    v_released := v_released + 1;
  END LOOP;

  SELECT * INTO t FROM traversal WHERE id = s.current_traversal_id AND outcome IS NULL;
  IF FOUND THEN
    -- c. deadline
    IF t.deadline < now() AND t.failure_reason IS NULL THEN
      UPDATE traversal SET failure_reason = 'Timed out' WHERE id = t.id;
      t.failure_reason := 'Timed out';
      v_timed_out := true;
      v_events := v_events || kiln_ev('stack', t.id, NULL, NULL, NULL, t.action, 'IN_PROGRESS', 'Timed out', jsonb_build_object('failing', true));
      v_abort := jsonb_build_object('stack_id', s.id, 'traversal_id', t.id, 'mode', 'this', 'reason', 'timed out');
      PERFORM pg_notify('kiln_abort', v_abort::text);
      PERFORM kiln_abort_jobs(v_abort);
    END IF;
    -- d. lost messages (only when the traversal is still scheduling)
    IF t.failure_reason IS NULL THEN
      FOR sp IN SELECT * FROM kiln_lost_nodes(t.id) LOOP
        UPDATE sync_point SET state = 'READY', updated_at = now()
         WHERE traversal_id = sp.traversal_id AND resource_id = sp.resource_id AND is_update = sp.is_update;
        INSERT INTO job (kind, stack_id, project_id, traversal_id, resource_id, is_update, graph_key_id)
        VALUES ('check_resource', s.id, s.project_id, t.id, coalesce(sp.actor_id, sp.resource_id), sp.is_update,
                CASE WHEN sp.actor_id IS NOT NULL AND sp.actor_id <> sp.resource_id THEN sp.resource_id END);
        v_requeued := v_requeued + 1;
        v_events := v_events || kiln_ev('node', t.id, sp.resource_id, NULL, NULL, NULL, NULL, 'requeued by the sweeper',
          jsonb_build_object('rid', sp.resource_id, 'update', sp.is_update, 'state', 'READY', 'requeued', true));
      END LOOP;
    END IF;
  END IF;

  PERFORM kiln_emit(s.id, to_jsonb(v_events));
  -- e. settle (complete or fail the stack) if its traversal ended
  IF t.id IS NOT NULL THEN PERFORM kiln_settle(s.id, t.id); END IF;
  IF v_requeued > 0 OR v_released > 0 THEN PERFORM pg_notify('kiln_jobs', ''); END IF;
  RETURN jsonb_build_object('broken', v_broken, 'requeued', v_requeued, 'released', v_released, 'timed_out', v_timed_out);
END $$;
