-- kiln_finish_node: a worker is done with a node. One round trip, one
-- transaction (lock order: 10_events.sql):
--
--   1. release the row's lock, writing its new state (guarded: the lock must
--      still be ours — a lock broken after our lease ran out is not ours);
--   2. retrigger the newer traversal's node that found the row locked, if any
--      (every exit path of a lock holder — success, failure, timeout, abort,
--      replacement — comes through here or kiln_replace_node);
--   3. if the traversal is still current:
--        failure -> the traversal is failing (kiln_settle then fails the
--                   stack once nothing is in flight);
--        success -> report to each successor's sync point (one sync_input row
--                   per edge: O(edges) in total); the report that completes a
--                   node's set makes it READY and inserts its job (up to
--                   claim_max of them claimed by this worker when
--                   p_result.claim, and begun too when that needs no waiting,
--                   so the worker continues with them without a queue hop or
--                   another round trip); a root counts down the traversal.
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

CREATE OR REPLACE FUNCTION kiln_retrigger_waiter(p_stack stack, p_rid int, p_trav uuid, p_upd boolean) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_name text;
BEGIN
  IF p_trav IS NULL OR p_stack.current_traversal_id IS DISTINCT FROM p_trav THEN RETURN NULL; END IF;
  UPDATE sync_point SET state = 'READY', actor_id = NULL, updated_at = now()
   WHERE traversal_id = p_trav AND resource_id = p_rid AND is_update = p_upd AND state = 'BLOCKED';
  IF NOT FOUND THEN RETURN NULL; END IF;
  INSERT INTO job (kind, stack_id, project_id, traversal_id, resource_id, is_update) VALUES ('check_resource', p_stack.id, p_stack.project_id, p_trav, p_rid, p_upd);
  SELECT name INTO v_name FROM resource WHERE id = p_rid;
  RETURN kiln_ev('node', p_trav, p_rid, v_name, NULL, NULL, NULL, 'retriggered: the older traversal released the lock',
                 jsonb_build_object('rid', p_rid, 'update', p_upd, 'state', 'READY', 'retriggered', true));
END $$;

-- A stack left IN_PROGRESS: NOTIFY kiln_stack '{stack_id, traversal_id, action, status}',
-- for whoever waits for an operation to end (the bench; scripts) without
-- reading every event.
CREATE OR REPLACE FUNCTION kiln_notify_settled(p_stack uuid, p_trav uuid, p_action text, p_status text) RETURNS void LANGUAGE sql AS $$
  SELECT pg_notify('kiln_stack', json_build_object('stack_id', p_stack, 'traversal_id', p_trav, 'action', p_action, 'status', p_status)::text)
$$;

-- When a failing traversal has nothing left in flight: stack FAILED, the rest
-- of its queue dropped, and (if the stack rolls back on failure) a rollback job.
-- Its parked nodes are in flight too: they are woken to stop (a failing
-- traversal schedules nothing new, and a parked node is waiting, not acting:
-- the stack settles now rather than when the longest wait ends), and the
-- settle that follows their finishes fails the stack.
CREATE OR REPLACE FUNCTION kiln_maybe_finish_failed(p_stack uuid, p_trav uuid) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  t traversal%ROWTYPE;
  s stack%ROWTYPE;
  v_reason text;
BEGIN
  SELECT * INTO t FROM traversal WHERE id = p_trav;
  IF t.outcome IS NOT NULL OR t.failure_reason IS NULL THEN RETURN false; END IF;
  IF EXISTS (SELECT 1 FROM job WHERE traversal_id = p_trav AND kind = 'check_resource' AND locked_by IS NOT NULL) THEN
    RETURN false;
  END IF;
  IF EXISTS (SELECT 1 FROM job WHERE stack_id = p_stack AND traversal_id = p_trav AND park IS NOT NULL) THEN
    PERFORM kiln_abort_jobs(jsonb_build_object('stack_id', p_stack, 'traversal_id', p_trav, 'mode', 'this',
                                                 'reason', 'the stack is failing: ' || t.failure_reason));
    RETURN false;
  END IF;
  v_reason := t.failure_reason;
  UPDATE stack SET status = 'FAILED', status_reason = v_reason
   WHERE id = p_stack AND current_traversal_id = p_trav AND status = 'IN_PROGRESS' RETURNING * INTO s;
  IF NOT FOUND THEN RETURN false; END IF;
  UPDATE traversal SET outcome = 'FAILED', outcome_reason = v_reason, ended_at = now() WHERE id = p_trav;
  DELETE FROM job WHERE traversal_id = p_trav AND kind = 'check_resource';
  UPDATE sync_point SET state = 'SKIPPED', updated_at = now() WHERE traversal_id = p_trav AND state IN ('WAITING', 'READY', 'BLOCKED');
  PERFORM kiln_emit(p_stack, jsonb_build_array(kiln_ev('stack', p_trav, NULL, NULL, NULL, s.action, 'FAILED', v_reason, NULL)));
  PERFORM kiln_notify_settled(p_stack, p_trav, s.action, 'FAILED');
  IF NOT s.disable_rollback AND t.action IN ('CREATE', 'UPDATE') THEN
    INSERT INTO job (kind, stack_id, project_id, traversal_id) VALUES ('rollback', p_stack, s.project_id, p_trav);
    PERFORM pg_notify('kiln_jobs', '');
  END IF;
  RETURN true;
END $$;

-- The last root reported: the stack is COMPLETE. Rows deleted by this (or an
-- earlier) traversal are purged; a DELETE traversal soft-deletes the stack.
CREATE OR REPLACE FUNCTION kiln_complete_traversal(p_stack uuid, p_trav uuid) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  t traversal%ROWTYPE;
  s stack%ROWTYPE;
  v_reason text;
BEGIN
  SELECT * INTO t FROM traversal WHERE id = p_trav;
  v_reason := 'Stack ' || t.action || ' completed successfully';
  UPDATE stack SET status = 'COMPLETE', status_reason = v_reason,
         last_good_template_id = CASE WHEN t.action IN ('DELETE', 'CHECK', 'DRIFT') THEN last_good_template_id ELSE t.raw_template_id END,
         deleted_at = CASE WHEN t.action = 'DELETE' THEN now() ELSE deleted_at END
   WHERE id = p_stack AND current_traversal_id = p_trav AND status = 'IN_PROGRESS' RETURNING * INTO s;
  IF NOT FOUND THEN RETURN; END IF;
  UPDATE traversal SET outcome = 'COMPLETE', outcome_reason = v_reason, ended_at = now() WHERE id = p_trav;
  PERFORM kiln_emit(p_stack, jsonb_build_array(kiln_ev('stack', p_trav, NULL, NULL, NULL, s.action, 'COMPLETE', v_reason, NULL)));
  PERFORM kiln_notify_settled(p_stack, p_trav, s.action, 'COMPLETE');
  DELETE FROM resource WHERE stack_id = p_stack AND action = 'DELETE' AND status = 'COMPLETE' AND engine_id IS NULL;
  DELETE FROM sync_input WHERE traversal_id = p_trav;
  DELETE FROM sync_point WHERE traversal_id = p_trav;
END $$;

-- With p_emit false (kiln_finish_nodes), the events and queued count are
-- returned (`stack_id`, `events`) for the caller to publish once per batch.
CREATE OR REPLACE FUNCTION kiln_finish_node(p_job bigint, p_worker uuid, p_result jsonb, p_emit boolean DEFAULT true) RETURNS jsonb LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  j job%ROWTYPE;
  s stack%ROWTYPE;
  t traversal%ROWTYPE;
  r resource%ROWTYPE;
  v_sp sync_point%ROWTYPE;
  v_new job%ROWTYPE;
  v_set jsonb := coalesce(p_result->'set', '{}');
  v_ok boolean := coalesce((p_result->>'ok')::boolean, false);
  v_srids int[];
  v_supds boolean[];
  v_current boolean;
  v_key int;
  -- Events gather in a jsonb[] (appending is amortised O(1) in PL/pgSQL), not
  -- a jsonb array: each `jsonb || element` re-encodes the whole array, O(n²) for
  -- a finish that completes a long tail of no-op cleanups inline (measured: 300
  -- events 96 ms as a jsonb array, 8 ms as a jsonb[]).
  v_events jsonb[] := '{}';
  v_ev jsonb;
  v_waiter_trav uuid;
  v_waiter_upd boolean;
  v_srid int;
  v_supd boolean;
  -- How many of the successors this finish makes ready the worker takes on
  -- (its free job slots); the rest are queued for any worker.
  v_claim_left int := CASE WHEN (p_result->>'claim')::boolean THEN coalesce((p_result->>'claim_max')::int, 1) ELSE 0 END;
  v_claimed jsonb := '[]';
  v_begun_events jsonb[] := '{}';
  v_free boolean;
  v_mine boolean;
  v_lock jsonb;
  v_parked jsonb;
  v_parked_ev jsonb;
  v_park boolean := false;
  v_begin_ms int := (p_result->>'begin_lease_ms')::int;
  v_row resource%ROWTYPE;
  v_queued int := 0;
  v_pending int;
  v_settle uuid;
  v_begin jsonb;
  v_lazy_types jsonb := p_result->'lazy_types';
  v_lazy boolean;
  v_root_of uuid;
  v_roots_done int := 0;
  v_direct int;
  v_i int;
  v_from int[];
  v_from_upd boolean[];
  v_from_name text[];
  v_got int;
  -- No-op cleanup nodes completed in one step at most (each adds to one
  -- transaction's events; the rest go to a worker, whose finish goes on).
  v_inline_left int := 64;
  -- A no-op cleanup node completed here (below): its successors not yet DONE,
  -- which it reports to; v_early: completed with its own row's update.
  v_open_rids int[];
  v_open_upds boolean[];
  v_early boolean;
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

  -- The keys of `set` are column names: jsonb_populate_record lays them over
  -- the row in one call (a JSON array becomes int[], a string a uuid).
  v_row := jsonb_populate_record(r, v_set);
  UPDATE resource SET
    action = v_row.action, status = v_row.status, status_reason = v_row.status_reason, type = v_row.type,
    physical_id = v_row.physical_id, properties = v_row.properties, attributes = v_row.attributes, data = v_row.data,
    secret_forms = v_row.secret_forms,
    -- a stored result replaces the intent written before the action (kiln_record_intent)
    pending_properties = CASE WHEN v_set ? 'properties' THEN NULL ELSE pending_properties END,
    requires = v_row.requires, current_template_id = v_row.current_template_id, deletion_policy = v_row.deletion_policy,
    replaced_by = CASE WHEN v_set->>'clear_replaced_by' = 'true' THEN NULL ELSE replaced_by END,
    engine_id = NULL, lock_traversal_id = NULL, lease_expires_at = NULL,
    waiter_traversal_id = NULL, waiter_is_update = NULL,
    atomic_key = atomic_key + 1, updated_at = now()
  WHERE id = r.id RETURNING * INTO r;
  v_lazy := v_lazy AND v_lazy_types ? r.type;
  DELETE FROM job WHERE id = p_job;

  IF coalesce((p_result->>'deleted')::boolean, false) THEN
    -- The replaced row is gone: its replacement no longer replaces anything (Heat's _update_replacement_data).
    UPDATE resource SET replaces = NULL
     WHERE replaces = r.id AND stack_id = s.id
       AND current_template_id = (SELECT raw_template_id FROM traversal WHERE id = j.traversal_id);
  END IF;

  -- Every sync point this transaction writes (all of the current traversal),
  -- locked at once in the global order — by kiln_finish_nodes for the whole
  -- batch when this finish is one of a batch (p_emit false: the same keys).
  IF v_current AND v_ok THEN
    SELECT coalesce(array_agg((e->>0)::int), '{}'), coalesce(array_agg((e->>1)::boolean), '{}') INTO v_srids, v_supds
      FROM jsonb_array_elements(p_result->'successors') e;
  END IF;
  IF p_emit THEN
    PERFORM kiln_lock_sync_points(s.current_traversal_id,
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
    IF NOT v_ok THEN
      UPDATE sync_point SET state = 'FAILED', updated_at = now()
       WHERE traversal_id = t.id AND resource_id = v_key AND is_update = j.is_update;
      UPDATE traversal SET failure_reason = coalesce(p_result->>'reason', 'resource failed') WHERE id = t.id AND failure_reason IS NULL;
      IF FOUND THEN
        v_events := v_events || kiln_ev('stack', t.id, NULL, NULL, NULL, t.action, 'IN_PROGRESS',
          'failing: ' || coalesce(p_result->>'reason', 'resource failed'), jsonb_build_object('failing', true));
      END IF;
      v_settle := t.id;
    ELSE
      UPDATE sync_point SET state = 'DONE', actor_id = r.id, updated_at = now()
       WHERE traversal_id = t.id AND resource_id = v_key AND is_update = j.is_update;
      IF t.failure_reason IS NOT NULL THEN
        v_settle := t.id;
      ELSE
        -- The reports to make: this node's to its successors, then those of
        -- no-op cleanup nodes completed below (sender arrays run alongside).
        v_direct := coalesce(array_length(v_srids, 1), 0);
        v_from := array_fill(v_key, ARRAY[v_direct]);
        v_from_upd := array_fill(j.is_update, ARRAY[v_direct]);
        v_from_name := array_fill(r.name, ARRAY[v_direct]);
        v_roots_done := CASE WHEN coalesce((p_result->>'is_root')::boolean, false) THEN 1 ELSE 0 END;
        v_i := 0;
        WHILE v_i < coalesce(array_length(v_srids, 1), 0) LOOP
          v_i := v_i + 1;
          v_srid := v_srids[v_i];
          v_supd := v_supds[v_i];
          -- A report's sync_input row makes it count once (a node run twice, Heat's
          -- duplicate triggers, reports twice). A no-op cleanup node completed
          -- below cannot report twice: it was completed under its sync point's lock,
          -- in the transaction that made it READY, and is DONE from then on. Its
          -- reports (always to cleanup nodes: no payload) write no row. With the
          -- skipped rewrite of last_traversal_id below, the tail an in-place
          -- update's last finish completes (55 no-op cleanups of layered-100,
          -- stepped alone) went from 12.1 to 9.0 ms.
          IF v_i <= v_direct THEN
            INSERT INTO sync_input (traversal_id, resource_id, is_update, sender_id, sender_is_update, payload)
            VALUES (t.id, v_srid, v_supd, v_from[v_i], v_from_upd[v_i], CASE WHEN v_supd THEN p_result->'payload' END)
            ON CONFLICT DO NOTHING;
            CONTINUE WHEN NOT FOUND;
          END IF;
          UPDATE sync_point SET satisfied = satisfied + 1,
                 state = CASE WHEN satisfied + 1 >= required AND state = 'WAITING' THEN 'READY' ELSE state END,
                 updated_at = now()
           WHERE traversal_id = t.id AND resource_id = v_srid AND is_update = v_supd
           RETURNING * INTO v_sp;
          CONTINUE WHEN NOT FOUND;
          -- Cleanup nodes with nothing to do are completed here, as the worker would
          -- (no lock, no action), in two cases:
          --  * inline: the node is READY (this report was its last input), its
          --    row is free and at the traversal's template (or already deleted:
          --    decideCleanup's no-op). An in-place update's cleanup tail then
          --    costs no round trip per node.
          --  * early: the node is this row's own cleanup, and this update has just
          --    left the row at the traversal's template (in place or unchanged),
          --    so the cleanup has nothing to do whenever it runs. Heat waits for
          --    the cleanup nodes of the rows that used this one; that order
          --    matters only for a row that is deleted, and this one is not. An
          --    old row it used is still deleted only after this update (this
          --    completion reports to it) and after every other row that used it
          --    directly (their own edges). The update then has no cleanup tail
          --    after its last update node.
          -- Successors already DONE (completed early) get no report; the others
          -- are taken without waiting, and if one is busy the node goes the usual
          -- way below. A node completed early still has inputs to come: each is an
          -- obligation added to the traversal's roots_pending now and paid when the
          -- input reports (a report into a DONE node, here or below), so the count
          -- reaches 0 only when every node has reported, as before.
          v_early := v_i <= v_direct AND NOT v_supd AND v_srid = v_key AND r.id = v_key AND j.is_update
                     AND v_sp.state IN ('WAITING', 'READY')
                     AND kiln_predicted_action(r, false, t.raw_template_id, t.action) IS NULL;
          IF NOT v_supd AND v_inline_left > 0 AND v_begin_ms IS NOT NULL AND t.deadline >= now() AND v_sp.successors IS NOT NULL
             AND (v_early OR (v_sp.state = 'READY' AND v_sp.satisfied = v_sp.required AND v_claim_left > 0)) THEN
            IF v_early THEN
              v_row := r; -- released above, still locked by this transaction
              v_free := true;
            ELSE
              SELECT * INTO v_row FROM resource WHERE id = v_srid FOR UPDATE SKIP LOCKED;
              -- No predicted action for a cleanup node is decideCleanup's no-op (a CHECK predicts CHECK).
              v_free := FOUND AND v_row.engine_id IS NULL AND kiln_predicted_action(v_row, false, t.raw_template_id, t.action) IS NULL;
            END IF;
            IF v_free THEN
              -- Each successor by key (a scalar subquery, a LATERAL with a lock): as
              -- a join, the generic plan reads every sync point of the traversal and
              -- hashes them, per node (O(N²) for the tail; test/db/plans.test.ts).
              SELECT coalesce(array_agg(k.rid) FILTER (WHERE NOT k.done), '{}'), coalesce(array_agg(k.upd) FILTER (WHERE NOT k.done), '{}')
                INTO v_open_rids, v_open_upds
                FROM (SELECT (x->>0)::int AS rid, (x->>1)::boolean AS upd,
                             coalesce((SELECT sp.state = 'DONE' FROM sync_point sp
                                        WHERE sp.traversal_id = t.id AND sp.resource_id = (x->>0)::int AND sp.is_update = (x->>1)::boolean), false) AS done
                        FROM jsonb_array_elements(v_sp.successors) x OFFSET 0) k; -- OFFSET 0: one lookup per successor, not one per use of `done`
              IF cardinality(v_open_rids) > 0 THEN
                SELECT count(*) = cardinality(v_open_rids) INTO v_free
                  FROM unnest(v_open_rids, v_open_upds) AS k(rid, upd)
                 CROSS JOIN LATERAL (SELECT 1 FROM sync_point sp
                                      WHERE sp.traversal_id = t.id AND sp.resource_id = k.rid AND sp.is_update = k.upd
                                        FOR UPDATE SKIP LOCKED) z;
              END IF;
            END IF;
            IF v_free THEN
              UPDATE sync_point SET state = 'DONE', actor_id = v_srid, updated_at = now()
               WHERE traversal_id = t.id AND resource_id = v_srid AND is_update = false;
              -- A row updated in place was marked when its update node began.
              IF v_row.last_traversal_id IS DISTINCT FROM t.id THEN
                UPDATE resource SET last_traversal_id = t.id WHERE id = v_srid;
              END IF;
              v_events := v_events || kiln_ev('node', t.id, v_srid, v_row.name, NULL, NULL, NULL,
                CASE WHEN v_row.current_template_id = t.raw_template_id THEN 'already at the traversal template' ELSE 'already deleted' END,
                jsonb_build_object('rid', v_srid, 'update', false, 'state', 'DONE', 'satisfied', v_sp.satisfied,
                                   'required', v_sp.required, 'from', v_from_name[v_i], 'inline', true)
                || CASE WHEN v_early THEN jsonb_build_object('early', true) ELSE '{}' END);
              v_inline_left := v_inline_left - 1;
              v_got := jsonb_array_length(v_sp.successors);
              -- roots_pending: a root done, a report to each DONE successor paid, the inputs still to come owed.
              v_roots_done := v_roots_done + CASE WHEN v_got = 0 THEN 1 ELSE 0 END
                              + (v_got - cardinality(v_open_rids)) - (v_sp.required - v_sp.satisfied);
              IF cardinality(v_open_rids) > 0 THEN
                v_srids := v_srids || v_open_rids;
                v_supds := v_supds || v_open_upds;
                v_from := v_from || array_fill(v_srid, ARRAY[cardinality(v_open_rids)]);
                v_from_upd := v_from_upd || array_fill(false, ARRAY[cardinality(v_open_rids)]);
                v_from_name := v_from_name || array_fill(v_row.name, ARRAY[cardinality(v_open_rids)]);
              END IF;
              CONTINUE;
            END IF;
          END IF;
          IF v_sp.state = 'DONE' THEN
            -- Completed early: this report was owed to roots_pending (above). A
            -- count beyond `required` would be a duplicate; none is written.
            IF v_sp.satisfied <= v_sp.required THEN v_roots_done := v_roots_done + 1; END IF;
            CONTINUE;
          END IF;
          IF v_sp.state = 'READY' AND v_sp.satisfied = v_sp.required THEN
            -- The worker continues with it (no queue hop) while it has room, and
            -- it is begun here when nothing stands in the way (the common case:
            -- a free row, time left): its row taken SKIP LOCKED (resource rows
            -- come before sync points in the lock order; we hold its sync point).
            v_free := false;
            IF v_claim_left > 0 AND v_begin_ms IS NOT NULL AND t.deadline >= now() THEN
              SELECT * INTO v_row FROM resource WHERE id = v_srid FOR UPDATE SKIP LOCKED;
              v_free := FOUND AND v_row.engine_id IS NULL;
            END IF;
            -- One claimed node whose row is busy is left to kiln_begin_core below.
            v_mine := v_free OR (v_claim_left > 0 AND v_parked IS NULL);
            INSERT INTO job (kind, stack_id, project_id, traversal_id, resource_id, is_update, locked_by, locked_at, attempts)
            VALUES ('check_resource', s.id, s.project_id, t.id, v_srid, v_supd,
                    CASE WHEN v_mine THEN p_worker END, CASE WHEN v_mine THEN now() END, CASE WHEN v_mine THEN 1 ELSE 0 END)
            RETURNING * INTO v_new;
            IF v_free THEN
              v_lock := kiln_lock_node_row(v_row, s, t, v_srid, v_supd, v_sp, p_worker, v_begin_ms);
              v_lazy := v_lazy AND v_lazy_types ? v_row.type;
              v_claimed := v_claimed || jsonb_build_array(jsonb_build_object('job', to_jsonb(v_new), 'begun', v_lock->'result'));
              v_begun_events := v_begun_events || (v_lock->'events'->0); -- kiln_lock_node_row writes one event
              v_claim_left := v_claim_left - 1;
              CONTINUE; -- its RUNNING event (inputs k of n) says all its "ready" would
            ELSIF v_mine THEN
              v_parked := to_jsonb(v_new);
              v_park := true;
              v_claim_left := v_claim_left - 1;
            ELSE
              v_queued := v_queued + 1;
            END IF;
          END IF;
          v_ev := kiln_ev('node', t.id, v_srid, NULL, NULL, NULL, NULL,
            CASE WHEN v_sp.state = 'READY' THEN 'ready' ELSE 'input reported' END,
            jsonb_build_object('rid', v_srid, 'update', v_supd, 'state', v_sp.state, 'satisfied', v_sp.satisfied,
                               'required', v_sp.required, 'from', v_from_name[v_i]));
          IF v_park THEN v_parked_ev := v_ev; v_park := false; ELSE v_events := v_events || v_ev; END IF;
        END LOOP;
        -- Negative when nodes completed early owe more reports than were paid.
        IF v_roots_done <> 0 THEN
          IF p_emit THEN
            UPDATE traversal SET roots_pending = roots_pending - v_roots_done WHERE id = t.id RETURNING roots_pending INTO v_pending;
            IF v_pending = 0 THEN v_settle := t.id; END IF;
          ELSE
            v_root_of := t.id; -- counted down by the batch, once, at its end
          END IF;
        END IF;
      END IF;
    END IF;
  END IF;

  IF v_waiter_trav IS NOT NULL THEN
    v_ev := kiln_retrigger_waiter(s, r.id, v_waiter_trav, v_waiter_upd);
    IF v_ev IS NOT NULL THEN
      v_events := v_events || v_ev;
      v_queued := v_queued + 1;
    END IF;
  END IF;
  IF v_parked IS NOT NULL THEN
    -- Claimed but not begun above (its row busy, time up): the general begin
    -- decides (blocked, a broken lease, a time-out) without waiting, or
    -- answers 'later' and leaves it to the worker.
    v_events := v_events || v_parked_ev;
    IF v_begin_ms IS NOT NULL THEN
      v_begin := kiln_begin_core((v_parked->>'id')::bigint, p_worker, v_begin_ms, true);
      v_settle := coalesce(v_settle, (v_begin->>'settle')::uuid);
      v_events := v_events || ARRAY(SELECT jsonb_array_elements(v_begin->'events'));
      v_lazy := v_lazy AND kiln_begun_lazily(v_begin->'result', v_lazy_types);
    END IF;
    v_claimed := v_claimed || jsonb_build_array(jsonb_build_object('job', v_parked, 'begun', v_begin->'result'));
  END IF;
  v_events := v_events || v_begun_events;
  IF NOT p_emit THEN
    RETURN jsonb_build_object('outcome', 'ok', 'claimed', v_claimed, 'queued', v_queued, 'settle', v_settle, 'stack_id', s.id, 'events', to_jsonb(v_events),
                              'lazy', coalesce(v_lazy, false), 'root_of', v_root_of, 'roots', v_roots_done);
  END IF;
  IF v_lazy THEN PERFORM kiln_commit_lazily(); END IF;
  PERFORM kiln_emit(s.id, to_jsonb(v_events));
  IF v_queued > 0 THEN PERFORM pg_notify('kiln_jobs', ''); END IF;
  RETURN jsonb_build_object('outcome', 'ok', 'claimed', v_claimed, 'queued', v_queued, 'settle', v_settle);
END $$;

-- kiln_finish_nodes: the finishes one worker has ready at the same moment for
-- one stack, in one transaction — one commit, one turn at the event lock —
-- instead of one after another (ten nodes that end together report into the
-- same successors, so their separate finishes would queue on those sync
-- points, each holding them through its commit).
--
-- Lock order (10_events.sql) across the whole batch: the stack row, every
-- row the finishes write (their own, and replacements whose `replaces` a
-- cleanup clears), then every sync point they write, each set in key order.
-- Each finish below then takes only locks the batch already holds, and
-- successors' rows SKIP LOCKED. One stack per batch, so one traversal row,
-- whose roots countdown the batch does once, after the finishes: the row
-- (lock order 4) is then held only through the commit, not through the whole
-- batch — every finish of a wide graph's is a root, and batches that took it
-- at their first root queued on each other for their whole length.
-- p_items: [{ job, result }] (result as for kiln_finish_node); returns the
-- results in the same order.
CREATE OR REPLACE FUNCTION kiln_finish_nodes(p_worker uuid, p_items jsonb) RETURNS jsonb LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_ids bigint[] := ARRAY(SELECT (e->>'job')::bigint FROM jsonb_array_elements(p_items) e);
  v_deleting bigint[] := ARRAY(SELECT (e->>'job')::bigint FROM jsonb_array_elements(p_items) e WHERE (e->'result'->>'deleted')::boolean);
  k record;
  v jsonb;
  v_item jsonb;
  -- jsonb[] accumulators, turned into jsonb once at the end (see kiln_finish_node)
  v_out jsonb[] := '{}';
  v_ev_stacks uuid[] := '{}';
  v_ev_lists jsonb[] := '{}';
  v_queued int := 0;
  v_budget int;
  v_lazy boolean := true;
  v_roots int := 0;
  v_root_of uuid;
  v_last_root int;
  v_pending int;
  v_jobs job[];
  v_rows int[];
BEGIN
  -- Every key looked up one by one (kiln_batch_jobs, 20_begin_node.sql).
  v_jobs := kiln_batch_jobs(v_ids, p_worker);
  -- The rows the finishes write: their own, and a deleted row's replacement
  -- (whose `replaces` its cleanup clears).
  IF cardinality(v_deleting) > 0 THEN
    v_rows := ARRAY(SELECT z.id FROM unnest(v_jobs) x
                     CROSS JOIN LATERAL (SELECT r.id FROM resource r WHERE r.replaces = x.resource_id OFFSET 0) z
                    WHERE x.id = ANY(v_deleting));
  END IF;
  PERFORM kiln_lock_batch(v_jobs, coalesce(v_rows, '{}'));
  -- The sync points each finish will write: its own node and, on success, its
  -- successors (current traversal only), and its row's waiter.
  FOR k IN
    WITH it AS (
      SELECT j.traversal_id, coalesce(j.graph_key_id, j.resource_id) AS node, j.is_update, s.current_traversal_id AS cur,
             r.id AS rid, r.waiter_traversal_id AS wt, r.waiter_is_update AS wu,
             coalesce((e->'result'->>'ok')::boolean, false) AS ok, coalesce(e->'result'->'successors', '[]') AS succs
        FROM jsonb_array_elements(p_items) e
        JOIN unnest(v_jobs) j ON j.id = (e->>'job')::bigint
        CROSS JOIN LATERAL (SELECT s.current_traversal_id FROM stack s WHERE s.id = j.stack_id OFFSET 0) s
        -- the holder checked outside the probe (as in kiln_batch_jobs): inside, a
        -- plan searched every locked row (the lease index) for each row
        CROSS JOIN LATERAL (SELECT r.id, r.engine_id, r.waiter_traversal_id, r.waiter_is_update FROM resource r
                             WHERE r.id = j.resource_id OFFSET 0) r
       WHERE r.engine_id = p_worker
    ), keys AS (
      SELECT cur AS trav, node AS rid, is_update AS upd FROM it WHERE traversal_id = cur
      UNION SELECT cur, (x->>0)::int, (x->>1)::boolean FROM it, jsonb_array_elements(it.succs) x WHERE traversal_id = cur AND ok
      UNION SELECT cur, rid, wu FROM it WHERE wt = cur
    )
    SELECT trav, array_agg(rid) AS rids, array_agg(upd) AS upds FROM keys GROUP BY trav ORDER BY trav
  LOOP
    PERFORM kiln_lock_sync_points(k.trav, k.rids, k.upds);
  END LOOP;

  -- The worker's free slots are one budget for the whole batch, not one per finish.
  v_budget := (SELECT max(coalesce((e->'result'->>'claim_max')::int, 1)) FROM jsonb_array_elements(p_items) e);
  FOR v_item IN SELECT e FROM jsonb_array_elements(p_items) e LOOP
    v := kiln_finish_node((v_item->>'job')::bigint, p_worker,
           jsonb_set(v_item->'result', '{claim_max}', to_jsonb(greatest(v_budget, 0))), false);
    v_budget := v_budget - coalesce(jsonb_array_length(v->'claimed'), 0);
    v_lazy := v_lazy AND coalesce((v->>'lazy')::boolean, false);
    IF v->>'root_of' IS NOT NULL THEN
      v_roots := v_roots + (v->>'roots')::int;
      v_root_of := (v->>'root_of')::uuid;
      v_last_root := cardinality(v_out); -- 0-based index of this item
    END IF;
    IF v ? 'events' THEN
      v_ev_stacks := v_ev_stacks || (v->>'stack_id')::uuid;
      v_ev_lists := v_ev_lists || (v->'events');
      v_queued := v_queued + (v->>'queued')::int;
    END IF;
    v_out := v_out || (v - 'events' - 'stack_id' - 'lazy' - 'root_of' - 'roots');
  END LOOP;
  IF v_roots <> 0 THEN
    UPDATE traversal SET roots_pending = roots_pending - v_roots WHERE id = v_root_of RETURNING roots_pending INTO v_pending;
    IF v_pending = 0 THEN
      v_out[v_last_root + 1] := jsonb_set(v_out[v_last_root + 1], '{settle}', to_jsonb(v_root_of));
    END IF;
  END IF;
  -- Lazily only when every finish of the batch may (a 'gone' one wrote nothing to speak of, but says no).
  IF v_lazy THEN PERFORM kiln_commit_lazily(); END IF;
  PERFORM kiln_emit_each(kiln_events_by_stack(v_ev_stacks, v_ev_lists));
  IF v_queued > 0 THEN PERFORM pg_notify('kiln_jobs', ''); END IF;
  RETURN to_jsonb(v_out);
END $$;

-- kiln_settle: after a node step reported that its traversal may have ended
-- (the last root done, or a failure), decide the stack's status — alone on the
-- stack row. Idempotent; the sweeper calls it too for a caller that died.
CREATE OR REPLACE FUNCTION kiln_settle(p_stack uuid, p_trav uuid) RETURNS text LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  s stack%ROWTYPE;
  t traversal%ROWTYPE;
BEGIN
  SELECT * INTO s FROM stack WHERE id = p_stack FOR NO KEY UPDATE;
  IF NOT FOUND OR s.current_traversal_id IS DISTINCT FROM p_trav THEN RETURN 'stale'; END IF;
  SELECT * INTO t FROM traversal WHERE id = p_trav;
  IF t.outcome IS NOT NULL THEN RETURN t.outcome; END IF;
  IF t.failure_reason IS NOT NULL THEN
    RETURN CASE WHEN kiln_maybe_finish_failed(p_stack, p_trav) THEN 'FAILED' ELSE 'failing' END;
  END IF;
  IF t.roots_pending <= 0 THEN
    PERFORM kiln_complete_traversal(p_stack, p_trav);
    RETURN 'COMPLETE';
  END IF;
  RETURN 'running';
END $$;
