-- The sweeper: what keeps a traversal from ever stalling (Heat §6.2: a lost
-- message or a dead engine leaves Heat's stack IN_PROGRESS forever). Every
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

-- A node that should have a message and has none: READY without a job, or
-- BLOCKED/RUNNING on a row nobody holds (the retrigger or the holder went
-- missing). Not younger than 2 s: its step may still be committing. A READY
-- node waiting in a long queue is not lost (its job exists): with 10,000
-- nodes that is most of them, and the check is one anti-join over the queue,
-- never a scan of the queue per node. No index finds a node's job by its
-- key, so a nested loop would read the traversal's whole queue once per node
-- (the plan PostgreSQL chose whenever its statistics said the queue was
-- small: 2.3 million index entries, 1.25 million rows, for one sweep of a 1,600-node traversal,
-- test/db/plans.test.ts). Hence no nested loops: the queue is hashed once.
CREATE OR REPLACE FUNCTION kiln_lost_nodes(p_trav uuid) RETURNS SETOF sync_point LANGUAGE sql STABLE SET enable_nestloop = off AS $$
  SELECT sp.* FROM sync_point sp
   WHERE sp.traversal_id = p_trav AND sp.state IN ('READY', 'BLOCKED', 'RUNNING') AND sp.updated_at < now() - interval '2 seconds'
     AND NOT EXISTS (SELECT 1 FROM job j WHERE j.stack_id = sp.stack_id AND j.traversal_id = sp.traversal_id AND coalesce(j.graph_key_id, j.resource_id) = sp.resource_id
                       AND j.is_update = sp.is_update AND j.kind = 'check_resource')
     AND (sp.state = 'READY' OR NOT EXISTS (SELECT 1 FROM resource x WHERE x.id = coalesce(sp.actor_id, sp.resource_id) AND x.engine_id IS NOT NULL))
$$;

CREATE OR REPLACE FUNCTION kiln_sweep_candidates(p_lease_ms int) RETURNS TABLE (stack_id uuid) LANGUAGE sql STABLE AS $$
  SELECT r.stack_id FROM resource r WHERE r.engine_id IS NOT NULL AND r.lease_expires_at < now()
  UNION
  SELECT j.stack_id FROM job j
   WHERE j.locked_by IS NOT NULL AND j.locked_at < now() - p_lease_ms * interval '1 millisecond'
     AND NOT EXISTS (SELECT 1 FROM worker w WHERE w.id = j.locked_by AND w.stopped_at IS NULL
                       AND w.heartbeat_at > now() - p_lease_ms * interval '1 millisecond')
  UNION
  SELECT t.stack_id FROM traversal t WHERE t.outcome IS NULL AND (t.deadline < now() OR t.failure_reason IS NOT NULL OR t.roots_pending <= 0)
  UNION
  SELECT t.stack_id FROM traversal t
   WHERE t.outcome IS NULL AND t.failure_reason IS NULL AND EXISTS (SELECT 1 FROM kiln_lost_nodes(t.id))
$$;


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

-- Heartbeat: a worker proves it is alive and extends the leases of the locks it holds.
-- Only the rows the worker says it is acting on are extended, so a lock it
-- forgot (a bug) still expires and is swept.
CREATE OR REPLACE FUNCTION kiln_heartbeat(p_worker uuid, p_lease_ms int, p_rows int[]) RETURNS int LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_n int;
BEGIN
  UPDATE worker SET heartbeat_at = now(), state = CASE WHEN state = 'dead' THEN 'running' ELSE state END
   WHERE id = p_worker AND stopped_at IS NULL;
  IF NOT FOUND THEN RETURN -1; END IF;
  -- Rows in id order, as every other multi-row lock of resource rows.
  UPDATE resource SET lease_expires_at = now() + p_lease_ms * interval '1 millisecond'
   WHERE id IN (SELECT id FROM resource WHERE engine_id = p_worker AND id = ANY(p_rows) ORDER BY id FOR UPDATE);
  GET DIAGNOSTICS v_n = ROW_COUNT;
  RETURN v_n;
END $$;
