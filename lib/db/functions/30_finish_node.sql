-- kiln_finish_node: a worker is done with a node. One round trip, one
-- transaction (lock order: 10_events.sql). This is the entry point the
-- worker calls; each step below is a function in a file of its own:
--
--   0. the job must still be ours ('gone': a retry after a lost reply, or
--      the sweeper gave it back), and so must the row's lock ('lock_lost': a
--      lock broken after our lease ran out is not ours; whoever broke it
--      re-runs the node); the stack row is taken shared, the row FOR UPDATE;
--   1. release the row, writing its new state
--        kiln_finish_release_row         31_finish_release_row.sql
--   2. lock every sync point the finish writes, in the global order
--      (kiln_lock_sync_points; a batch has locked them already);
--   3. if the traversal is still current, the node's own sync point: DONE,
--      or FAILED and the traversal failing (kiln_settle then fails the stack
--      once nothing is in flight)
--        kiln_finish_mark_node           32_finish_mark_node.sql
--   4. on success, unless the traversal is failing, report to each
--      successor's sync point (one sync_input row per edge: O(edges) in
--      total); a root counts down the traversal (roots_pending). Each report
--      is a step, and what it makes of its successor decides the next:
--        report to the sync point
--          kiln_report_to_sync_point     33_report_to_sync_point.sql
--        a cleanup node with nothing to do, completed here without a worker
--        (its own reports join the list)
--          kiln_complete_noop_cleanup    34_complete_noop_cleanup.sql
--        a successor made READY: claim and begin it (up to claim_max of them
--        claimed by this worker when p_result.claim, and begun too when that
--        needs no waiting, so the worker continues with them without a queue
--        hop or another round trip); the rest are queued
--          kiln_claim_successor          35_claim_successor.sql
--   5. retrigger the newer traversal's node that found the row locked, if
--      any (every exit path of a lock holder — success, failure, timeout,
--      abort, replacement — comes through here or kiln_replace_node)
--        kiln_retrigger_waiter           36_retrigger_waiter.sql
--   6. begin the one successor claimed in 4 whose row was busy, without
--      waiting (kiln_begin_core, 20_begin_node.sql);
--   7. emit: commit lazily if it may, publish the events, NOTIFY kiln_jobs,
--      and answer
--        kiln_finish_emit                37_finish_emit.sql
--
-- Node steps of one stack run side by side (they share the stack row), so
-- anything that changes the stack row itself — COMPLETE, FAILED, a rollback —
-- is left to kiln_settle, which the caller runs after commit when the reply
-- names a traversal in `settle` (and the sweeper runs if the caller died).
--
-- p_result: { ok, reason, set: {column: value, …}, resource_event, payload,
--             successors: [[rid, is_update], …], is_root, claim, claim_max, deleted,
--             begin_lease_ms, in_progress_event, lazy_types }
-- Returns { outcome, claimed: [{ job, begun }], queued, settle }; the
-- transaction commits lazily (kiln_commit_lazily) when every row it releases or
-- locks is of a type in lazy_types.
--
-- With p_emit false (kiln_finish_nodes), the events and queued count are
-- returned (`stack_id`, `events`) for the caller to publish once per batch.
CREATE OR REPLACE FUNCTION kiln_finish_node(p_job bigint, p_worker uuid, p_result jsonb, p_emit boolean DEFAULT true) RETURNS jsonb LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  j job%ROWTYPE;
  s stack%ROWTYPE;
  t traversal%ROWTYPE;
  r resource%ROWTYPE;
  v_ok boolean := coalesce((p_result->>'ok')::boolean, false);
  v_begin_ms int := (p_result->>'begin_lease_ms')::int;
  v_lazy_types jsonb := p_result->'lazy_types';
  v_lazy boolean;
  v_key int;
  v_current boolean;
  v_waiter_trav uuid;
  v_waiter_upd boolean;
  -- The reports to make (step 4): this node's to its successors, then those
  -- of no-op cleanup nodes completed on the way (sender arrays run alongside).
  v_srids int[];
  v_supds boolean[];
  v_direct int;
  v_from int[];
  v_from_upd boolean[];
  v_from_name text[];
  v_i int := 0;
  v_srid int;
  v_supd boolean;
  v_sp sync_point%ROWTYPE;
  -- How many of the successors this finish makes ready the worker takes on
  -- (its free job slots); the rest are queued for any worker.
  v_claim_left int := CASE WHEN (p_result->>'claim')::boolean THEN coalesce((p_result->>'claim_max')::int, 1) ELSE 0 END;
  -- No-op cleanup nodes completed in one step at most (each adds to one
  -- transaction's events; the rest go to a worker, whose finish goes on).
  v_inline_left int := 64;
  -- A cleanup node completed with its own row's update (kiln_complete_noop_cleanup).
  v_early boolean;
  -- What kiln_complete_noop_cleanup and kiln_claim_successor did (their OUT parameters).
  v_done record;
  v_got record;
  -- Events gather in a jsonb[] (appending is amortised O(1) in PL/pgSQL), not
  -- a jsonb array: each `jsonb || element` re-encodes the whole array, O(n²) for
  -- a finish that completes a long tail of no-op cleanups inline (measured: 300
  -- events 96 ms as a jsonb array, 8 ms as a jsonb[]).
  v_events jsonb[] := '{}';
  v_ev jsonb;
  v_claimed jsonb := '[]';
  v_begun_events jsonb[] := '{}';
  -- The one successor claimed but not begun in step 4 (its job), and its event.
  v_held jsonb;
  v_held_ev jsonb;
  v_hold boolean;
  v_begin jsonb;
  v_queued int := 0;
  v_settle uuid;
  v_roots int := 0;
  v_root_of uuid;
  v_pending int;
  -- A void call assigned to it is cheaper than a PERFORM (kiln_finish_emit).
  v_void text;
BEGIN
  SELECT * INTO j FROM job WHERE id = p_job;
  IF NOT FOUND OR j.locked_by IS DISTINCT FROM p_worker THEN
    -- Already finished (a retry after a lost reply) or taken away by the sweeper.
    RETURN jsonb_build_object('outcome', 'gone');
  END IF;
  SELECT * INTO s FROM stack WHERE id = j.stack_id FOR SHARE;
  SELECT * INTO r FROM resource WHERE id = j.resource_id FOR UPDATE;
  IF NOT FOUND OR r.engine_id IS DISTINCT FROM p_worker THEN
    -- Our lease ran out and the lock was broken; whoever broke it re-runs the node.
    DELETE FROM job WHERE id = p_job;
    RETURN jsonb_build_object('outcome', 'lock_lost');
  END IF;
  v_waiter_trav := r.waiter_traversal_id;
  v_waiter_upd := r.waiter_is_update;
  v_lazy := v_lazy_types ? r.type;
  v_key := coalesce(j.graph_key_id, j.resource_id);
  v_current := s.current_traversal_id IS NOT DISTINCT FROM j.traversal_id;

  -- 1. Release the row.
  r := kiln_finish_release_row(r, p_job, j.traversal_id, s.id, p_result);
  v_lazy := v_lazy AND v_lazy_types ? r.type;

  -- 2. Every sync point this transaction writes (all of the current traversal),
  -- locked at once in the global order — by kiln_finish_nodes for the whole
  -- batch when this finish is one of a batch (p_emit false: the same keys).
  IF v_current AND v_ok THEN
    SELECT coalesce(array_agg((e->>0)::int), '{}'), coalesce(array_agg((e->>1)::boolean), '{}') INTO v_srids, v_supds
      FROM jsonb_array_elements(p_result->'successors') e;
  END IF;
  IF p_emit THEN
    v_void := kiln_lock_sync_points(s.current_traversal_id,
      CASE WHEN v_current THEN v_key END || coalesce(v_srids, '{}') || CASE WHEN v_waiter_trav = s.current_traversal_id THEN r.id END,
      j.is_update || coalesce(v_supds, '{}') || v_waiter_upd);
  END IF;

  IF p_result ? 'in_progress_event' THEN
    -- A quick action was not marked IN_PROGRESS while it ran (kiln_mark_in_progress): the history still shows it.
    v_events := v_events || kiln_in_progress_ev(j.traversal_id, r, p_result->>'in_progress_event', v_key, j.is_update);
  END IF;
  v_events := v_events || kiln_ev(CASE WHEN coalesce((p_result->>'resource_event')::boolean, false) THEN 'resource' ELSE 'node' END,
    j.traversal_id, r.id, r.name, r.physical_id,
    CASE WHEN coalesce((p_result->>'resource_event')::boolean, false) THEN r.action END,
    CASE WHEN coalesce((p_result->>'resource_event')::boolean, false) THEN r.status END,
    coalesce(p_result->>'reason', CASE WHEN v_ok THEN 'done' ELSE 'failed' END),
    jsonb_build_object('rid', v_key, 'update', j.is_update, 'actor', r.id, 'state', CASE WHEN v_ok THEN 'DONE' ELSE 'FAILED' END,
                       'lock', 'released', 'stale', NOT v_current) || coalesce(p_result->'event_data', '{}'));

  IF v_current THEN
    SELECT * INTO t FROM traversal WHERE id = j.traversal_id;
    -- 3. The node's own sync point.
    v_ev := kiln_finish_mark_node(t.id, t.action, v_key, j.is_update, r.id, v_ok, p_result->>'reason');
    IF v_ev IS NOT NULL THEN v_events := v_events || v_ev; END IF;
    IF NOT v_ok OR t.failure_reason IS NOT NULL THEN
      v_settle := t.id;
    ELSE
      -- 4. Report to the successors.
      v_direct := coalesce(array_length(v_srids, 1), 0);
      v_from := array_fill(v_key, ARRAY[v_direct]);
      v_from_upd := array_fill(j.is_update, ARRAY[v_direct]);
      v_from_name := array_fill(r.name, ARRAY[v_direct]);
      v_roots := CASE WHEN coalesce((p_result->>'is_root')::boolean, false) THEN 1 ELSE 0 END;
      WHILE v_i < coalesce(array_length(v_srids, 1), 0) LOOP
        v_i := v_i + 1;
        v_srid := v_srids[v_i];
        v_supd := v_supds[v_i];
        -- This node's own reports write their input; a no-op cleanup's do not.
        v_sp := kiln_report_to_sync_point(t.id, v_srid, v_supd, v_from[v_i], v_from_upd[v_i],
                                          CASE WHEN v_supd THEN p_result->'payload' END, v_i <= v_direct);
        CONTINUE WHEN v_sp.traversal_id IS NULL; -- a duplicate
        v_early := v_i <= v_direct AND NOT v_supd AND v_srid = v_key AND r.id = v_key AND j.is_update
                   AND v_sp.state IN ('WAITING', 'READY')
                   AND kiln_predicted_action(r, false, t.raw_template_id, t.action) IS NULL;
        IF NOT v_supd AND v_inline_left > 0 AND v_begin_ms IS NOT NULL AND t.deadline >= now() AND v_sp.successors IS NOT NULL
           AND (v_early OR (v_sp.state = 'READY' AND v_sp.satisfied = v_sp.required AND v_claim_left > 0)) THEN
          -- Early: its row is r, released above and still locked by this transaction.
          v_done := kiln_complete_noop_cleanup(t.id, t.raw_template_id, t.action, v_srid, v_sp.successors, v_sp.satisfied, v_sp.required,
                                               CASE WHEN v_early THEN r END, v_from_name[v_i]);
          IF v_done.completed THEN
            v_events := v_events || v_done.event;
            v_inline_left := v_inline_left - 1;
            v_roots := v_roots + v_done.roots;
            IF cardinality(v_done.open_rids) > 0 THEN
              v_srids := v_srids || v_done.open_rids;
              v_supds := v_supds || v_done.open_upds;
              v_from := v_from || array_fill(v_srid, ARRAY[cardinality(v_done.open_rids)]);
              v_from_upd := v_from_upd || array_fill(false, ARRAY[cardinality(v_done.open_rids)]);
              v_from_name := v_from_name || array_fill(v_done.sender_name, ARRAY[cardinality(v_done.open_rids)]);
            END IF;
            CONTINUE;
          END IF;
        END IF;
        IF v_sp.state = 'DONE' THEN
          -- Completed early: this report was owed to roots_pending (above). A
          -- count beyond `required` would be a duplicate; none is written.
          IF v_sp.satisfied <= v_sp.required THEN v_roots := v_roots + 1; END IF;
          CONTINUE;
        END IF;
        v_hold := false;
        IF v_sp.state = 'READY' AND v_sp.satisfied = v_sp.required THEN
          v_got := kiln_claim_successor(s, t, v_sp, p_worker, v_begin_ms, v_claim_left > 0, v_held IS NULL);
          IF v_got.outcome = 'begun' THEN
            v_lazy := v_lazy AND v_lazy_types ? v_got.row_type;
            v_claimed := v_claimed || jsonb_build_array(jsonb_build_object('job', v_got.job, 'begun', v_got.begun));
            v_begun_events := v_begun_events || v_got.event;
            v_claim_left := v_claim_left - 1;
            CONTINUE; -- its RUNNING event (inputs k of n) says all its "ready" would
          ELSIF v_got.outcome = 'claimed' THEN
            v_held := v_got.job;
            v_hold := true;
            v_claim_left := v_claim_left - 1;
          ELSE
            v_queued := v_queued + 1;
          END IF;
        END IF;
        v_ev := kiln_ev('node', t.id, v_srid, NULL, NULL, NULL, NULL,
          CASE WHEN v_sp.state = 'READY' THEN 'ready' ELSE 'input reported' END,
          jsonb_build_object('rid', v_srid, 'update', v_supd, 'state', v_sp.state, 'satisfied', v_sp.satisfied,
                             'required', v_sp.required, 'from', v_from_name[v_i]));
        IF v_hold THEN v_held_ev := v_ev; ELSE v_events := v_events || v_ev; END IF;
      END LOOP;
      -- Negative when nodes completed early owe more reports than were paid.
      IF v_roots <> 0 THEN
        IF p_emit THEN
          UPDATE traversal SET roots_pending = roots_pending - v_roots WHERE id = t.id RETURNING roots_pending INTO v_pending;
          IF v_pending = 0 THEN v_settle := t.id; END IF;
        ELSE
          v_root_of := t.id; -- counted down by the batch, once, at its end
        END IF;
      END IF;
    END IF;
  END IF;

  -- 5. The newer traversal's node waiting for this row.
  IF v_waiter_trav IS NOT NULL THEN
    v_ev := kiln_retrigger_waiter(s, r.id, v_waiter_trav, v_waiter_upd);
    IF v_ev IS NOT NULL THEN
      v_events := v_events || v_ev;
      v_queued := v_queued + 1;
    END IF;
  END IF;
  -- 6. Claimed but not begun in step 4 (its row busy, time up): the general
  -- begin decides (blocked, a broken lease, a time-out) without waiting, or
  -- answers 'later' and leaves it to the worker.
  IF v_held IS NOT NULL THEN
    v_events := v_events || v_held_ev;
    IF v_begin_ms IS NOT NULL THEN
      v_begin := kiln_begin_core((v_held->>'id')::bigint, p_worker, v_begin_ms, true);
      v_settle := coalesce(v_settle, (v_begin->>'settle')::uuid);
      v_events := v_events || ARRAY(SELECT jsonb_array_elements(v_begin->'events'));
      v_lazy := v_lazy AND kiln_begun_lazily(v_begin->'result', v_lazy_types);
    END IF;
    v_claimed := v_claimed || jsonb_build_array(jsonb_build_object('job', v_held, 'begun', v_begin->'result'));
  END IF;
  v_events := v_events || v_begun_events;
  IF NOT p_emit THEN
    RETURN jsonb_build_object('outcome', 'ok', 'claimed', v_claimed, 'queued', v_queued, 'settle', v_settle, 'stack_id', s.id, 'events', to_jsonb(v_events),
                              'lazy', coalesce(v_lazy, false), 'root_of', v_root_of, 'roots', v_roots);
  END IF;
  -- 7. Emit, and answer.
  RETURN kiln_finish_emit(s.id, v_events, v_lazy, v_queued, v_claimed, v_settle);
END $$;
