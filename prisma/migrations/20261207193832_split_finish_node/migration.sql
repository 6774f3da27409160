-- lib/db/functions/30_finish_node.sql
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

-- lib/db/functions/31_finish_release_row.sql
-- kiln_finish_release_row: step 1 of kiln_finish_node. The node's row takes
-- the state its action left and lets go of its lock: p_result.set
-- ({column: value, …}) is laid over the row, the lock and the waiter are
-- cleared, atomic_key goes up. The node's job is deleted. A cleanup that
-- deleted a replaced row (p_result.deleted) also clears `replaces` on the
-- replacement made for its traversal's template.
--
-- Takes: the row as the worker locked it, the node's job (held by the
--   worker) and its traversal, the stack's id, the finish's p_result.
-- Returns: the row as released. (The waiter it had is the caller's to
--   retrigger: kiln_retrigger_waiter.)
-- Assumes locked: the stack row (shared) and p_row (FOR UPDATE, its lock
--   ours). A deleted row's replacement comes next in the lock order (2): a
--   batch has locked it up front; a lone finish takes it here.
-- Writes: the row; the job (deleted); `replaces` of the replacement.
CREATE OR REPLACE FUNCTION kiln_finish_release_row(p_row resource, p_job bigint, p_trav uuid, p_stack uuid, p_result jsonb) RETURNS resource LANGUAGE plpgsql AS $$
DECLARE
  v_set jsonb := coalesce(p_result->'set', '{}');
  -- The keys of `set` are column names: jsonb_populate_record lays them over
  -- the row in one call (a JSON array becomes int[], a string a uuid).
  v_row resource%ROWTYPE := jsonb_populate_record(p_row, v_set);
  r resource%ROWTYPE;
BEGIN
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
  WHERE id = p_row.id RETURNING * INTO r;
  DELETE FROM job WHERE id = p_job;

  IF coalesce((p_result->>'deleted')::boolean, false) THEN
    -- The replaced row is gone: its replacement no longer replaces anything (Heat's _update_replacement_data).
    UPDATE resource SET replaces = NULL
     WHERE replaces = p_row.id AND stack_id = p_stack
       AND current_template_id = (SELECT raw_template_id FROM traversal WHERE id = p_trav);
  END IF;
  RETURN r;
END $$;

-- lib/db/functions/32_finish_mark_node.sql
-- kiln_finish_mark_node: step 3 of kiln_finish_node, for a node of the
-- stack's current traversal: its own sync point records how it ended. DONE
-- (its actor: the row that did the work, a replacement when one
-- impersonates the node), or FAILED, and then the traversal is failing: its
-- first failure is kept (failure_reason), nothing new starts, and
-- kiln_settle fails the stack once nothing is in flight.
--
-- Takes: the traversal and its action, the node's key and is_update, the
--   actor's row id, whether the action succeeded, and the reason it gave.
-- Returns: the stack's 'failing' event when this failure is the traversal's
--   first; otherwise NULL.
-- Assumes locked: the node's sync point (kiln_lock_sync_points). The
--   traversal row comes last in the lock order (4): a failure takes it here.
-- Writes: the sync point; on a first failure, traversal.failure_reason.
CREATE OR REPLACE FUNCTION kiln_finish_mark_node(p_trav uuid, p_action text, p_key int, p_upd boolean, p_actor int, p_ok boolean, p_reason text) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  IF p_ok THEN
    UPDATE sync_point SET state = 'DONE', actor_id = p_actor, updated_at = now()
     WHERE traversal_id = p_trav AND resource_id = p_key AND is_update = p_upd;
    RETURN NULL;
  END IF;
  UPDATE sync_point SET state = 'FAILED', updated_at = now()
   WHERE traversal_id = p_trav AND resource_id = p_key AND is_update = p_upd;
  UPDATE traversal SET failure_reason = coalesce(p_reason, 'resource failed') WHERE id = p_trav AND failure_reason IS NULL;
  IF NOT FOUND THEN RETURN NULL; END IF;
  RETURN kiln_ev('stack', p_trav, NULL, NULL, NULL, p_action, 'IN_PROGRESS',
    'failing: ' || coalesce(p_reason, 'resource failed'), jsonb_build_object('failing', true));
END $$;

-- lib/db/functions/33_report_to_sync_point.sql
-- kiln_report_to_sync_point: one report into one successor's sync point
-- (kiln_finish_node, step 4): the sender's input, then the count; the report
-- that completes the node's set makes it READY.
--
-- A report's sync_input row makes it count once (a node run twice, Heat's
-- duplicate triggers, reports twice). A no-op cleanup node completed inline
-- (kiln_complete_noop_cleanup) cannot report twice: it was completed under
-- its sync point's lock, in the transaction that made it READY, and is DONE
-- from then on. Its reports (always to cleanup nodes: no payload) write no
-- row (p_input false). With the skipped rewrite of last_traversal_id there,
-- the tail an in-place update's last finish completes (55 no-op cleanups of
-- layered-100, stepped alone) went from 12.1 to 9.0 ms.
--
-- Takes: the traversal; the successor's key (p_rid, p_upd); the sender's
--   (p_sender, p_sender_upd); the payload (an update node's inputs; NULL for
--   a cleanup node); whether to write the input row.
-- Returns: the sync point as the report left it; NULL when the report did
--   not count (a duplicate) or the node has no sync point.
-- Assumes locked: the successor's sync point.
-- Writes: one sync_input row (p_input), the sync point (satisfied, state).
CREATE OR REPLACE FUNCTION kiln_report_to_sync_point(p_trav uuid, p_rid int, p_upd boolean, p_sender int, p_sender_upd boolean, p_payload jsonb, p_input boolean)
RETURNS sync_point LANGUAGE plpgsql AS $$
DECLARE
  v_sp sync_point%ROWTYPE;
BEGIN
  IF p_input THEN
    INSERT INTO sync_input (traversal_id, resource_id, is_update, sender_id, sender_is_update, payload)
    VALUES (p_trav, p_rid, p_upd, p_sender, p_sender_upd, p_payload)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN RETURN NULL; END IF;
  END IF;
  UPDATE sync_point SET satisfied = satisfied + 1,
         state = CASE WHEN satisfied + 1 >= required AND state = 'WAITING' THEN 'READY' ELSE state END,
         updated_at = now()
   WHERE traversal_id = p_trav AND resource_id = p_rid AND is_update = p_upd
   RETURNING * INTO v_sp;
  IF NOT FOUND THEN RETURN NULL; END IF;
  RETURN v_sp;
END $$;

-- lib/db/functions/34_complete_noop_cleanup.sql
-- kiln_complete_noop_cleanup: a cleanup node with nothing to do is completed
-- in the finish whose report reaches it (kiln_finish_node, step 4), as the
-- worker would complete it (no lock, no action), in two cases:
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
-- way (it is not completed here). A node completed early still has inputs to
-- come: each is an obligation added to the traversal's roots_pending now and
-- paid when the input reports (a report into a DONE node), so the count
-- reaches 0 only when every node has reported, as before.
--
-- Takes: the traversal (its id, template and action); the node's sync point
--   as the report left it (its key, successors and counts: a cleanup node's
--   is_update is false); for an early completion the node's row (the
--   finishing node's own, released and still locked by this transaction),
--   else NULL (the row is taken here, SKIP LOCKED); the sender's name (for
--   the event). Scalars rather than the traversal and sync point rows: each
--   row passed is copied into the callee, and this runs once per cleanup
--   node of an update.
-- Returns: completed (false: nothing was done, and nothing written); when
--   completed, its event, the successors it still reports to (open_rids[i],
--   open_upds[i]), what it adds to roots_pending's countdown (roots: 1 for a
--   root, 1 per successor already DONE, less each input still to come), and
--   the row's name (sender_name, for those reports).
-- Assumes locked: the node's sync point. Its row (unless early) and its
--   successors' sync points are taken SKIP LOCKED: the caller already holds
--   later locks of the lock order.
-- Writes: the node's sync point (DONE), its row's last_traversal_id (unless
--   already set: a row updated in place was marked when its update began).
CREATE OR REPLACE FUNCTION kiln_complete_noop_cleanup(
  p_trav uuid, p_template uuid, p_action text, p_rid int, p_successors jsonb, p_satisfied int, p_required int, p_row resource, p_from text,
  OUT completed boolean, OUT event jsonb, OUT open_rids int[], OUT open_upds boolean[], OUT roots int, OUT sender_name text
) LANGUAGE plpgsql AS $$
DECLARE
  v_early boolean := p_row.id IS NOT NULL;
  v_free boolean;
  v_got int;
BEGIN
  completed := false;
  IF NOT v_early THEN
    -- Not early: the row is read into p_row, and taken SKIP LOCKED.
    SELECT * INTO p_row FROM resource WHERE id = p_rid FOR UPDATE SKIP LOCKED;
    -- No predicted action for a cleanup node is decideCleanup's no-op (a CHECK predicts CHECK).
    v_free := FOUND AND p_row.engine_id IS NULL AND kiln_predicted_action(p_row, false, p_template, p_action) IS NULL;
    IF NOT v_free THEN RETURN; END IF;
  END IF;
  -- Each successor by key (a scalar subquery, a LATERAL with a lock): as
  -- a join, the generic plan reads every sync point of the traversal and
  -- hashes them, per node (O(N²) for the tail; test/db/plans.test.ts).
  SELECT coalesce(array_agg(k.rid) FILTER (WHERE NOT k.done), '{}'), coalesce(array_agg(k.upd) FILTER (WHERE NOT k.done), '{}')
    INTO open_rids, open_upds
    FROM (SELECT (x->>0)::int AS rid, (x->>1)::boolean AS upd,
                 coalesce((SELECT sp.state = 'DONE' FROM sync_point sp
                            WHERE sp.traversal_id = p_trav AND sp.resource_id = (x->>0)::int AND sp.is_update = (x->>1)::boolean), false) AS done
            FROM jsonb_array_elements(p_successors) x OFFSET 0) k; -- OFFSET 0: one lookup per successor, not one per use of `done`
  IF cardinality(open_rids) > 0 THEN
    SELECT count(*) = cardinality(open_rids) INTO v_free
      FROM unnest(open_rids, open_upds) AS k(rid, upd)
     CROSS JOIN LATERAL (SELECT 1 FROM sync_point sp
                          WHERE sp.traversal_id = p_trav AND sp.resource_id = k.rid AND sp.is_update = k.upd
                            FOR UPDATE SKIP LOCKED) z;
    IF NOT v_free THEN RETURN; END IF;
  END IF;
  UPDATE sync_point SET state = 'DONE', actor_id = p_rid, updated_at = now()
   WHERE traversal_id = p_trav AND resource_id = p_rid AND is_update = false;
  -- A row updated in place was marked when its update node began.
  IF p_row.last_traversal_id IS DISTINCT FROM p_trav THEN
    UPDATE resource SET last_traversal_id = p_trav WHERE id = p_rid;
  END IF;
  event := kiln_ev('node', p_trav, p_rid, p_row.name, NULL, NULL, NULL,
    CASE WHEN p_row.current_template_id = p_template THEN 'already at the traversal template' ELSE 'already deleted' END,
    jsonb_build_object('rid', p_rid, 'update', false, 'state', 'DONE', 'satisfied', p_satisfied,
                       'required', p_required, 'from', p_from, 'inline', true)
    || CASE WHEN v_early THEN jsonb_build_object('early', true) ELSE '{}' END);
  v_got := jsonb_array_length(p_successors);
  -- roots_pending: a root done, a report to each DONE successor paid, the inputs still to come owed.
  roots := CASE WHEN v_got = 0 THEN 1 ELSE 0 END + (v_got - cardinality(open_rids)) - (p_required - p_satisfied);
  sender_name := p_row.name;
  completed := true;
END $$;

-- lib/db/functions/35_claim_successor.sql
-- kiln_claim_successor: a report made a successor READY (kiln_finish_node,
-- step 4): its job is inserted, and the worker
-- continues with it (no queue hop) while it has room. It is begun here when
-- nothing stands in the way (the common case: a free row, time left): its
-- row taken SKIP LOCKED (resource rows come before sync points in the lock
-- order; we hold its sync point) and locked for the worker
-- (kiln_lock_node_row). One claimed node whose row is busy, or whose
-- traversal is out of time, is held instead: the finish begins it after its
-- other steps with kiln_begin_core, which decides (blocked, a broken lease, a
-- time-out) without waiting. Anything else is queued for any worker.
--
-- Takes: the stack and traversal rows; the successor's sync point (READY,
--   every input in); the worker; the lease of a begin (p_begin_ms; NULL:
--   claim nothing); whether the worker has room (p_room); whether the finish
--   may still hold one (p_may_hold: it holds none yet).
-- Returns: outcome 'begun' (job, begun: the lock's reply, event: its
--   RUNNING event, row_type: for lazy commits), 'claimed' (job: held for
--   kiln_begin_core) or 'queued' (nothing else: its job waits for a claim).
-- Assumes locked: the stack row (shared) and the successor's sync point.
-- Writes: the job; when begun, the row and the sync point (RUNNING).
CREATE OR REPLACE FUNCTION kiln_claim_successor(s stack, t traversal, p_sp sync_point, p_worker uuid, p_begin_ms int, p_room boolean, p_may_hold boolean,
  OUT outcome text, OUT job jsonb, OUT begun jsonb, OUT event jsonb, OUT row_type text
) LANGUAGE plpgsql AS $$
DECLARE
  v_srid int := p_sp.resource_id;
  v_supd boolean := p_sp.is_update;
  v_row resource%ROWTYPE;
  v_free boolean := false;
  v_mine boolean;
  v_new job%ROWTYPE;
  v_lock jsonb;
BEGIN
  IF p_room AND p_begin_ms IS NOT NULL AND t.deadline >= now() THEN
    SELECT * INTO v_row FROM resource WHERE id = v_srid FOR UPDATE SKIP LOCKED;
    v_free := FOUND AND v_row.engine_id IS NULL;
  END IF;
  v_mine := v_free OR (p_room AND p_may_hold);
  INSERT INTO job (kind, stack_id, project_id, traversal_id, resource_id, is_update, locked_by, locked_at, attempts)
  VALUES ('check_resource', s.id, s.project_id, t.id, v_srid, v_supd,
          CASE WHEN v_mine THEN p_worker END, CASE WHEN v_mine THEN now() END, CASE WHEN v_mine THEN 1 ELSE 0 END)
  RETURNING * INTO v_new;
  IF v_free THEN
    v_lock := kiln_lock_node_row(v_row, s, t, v_srid, v_supd, p_sp, p_worker, p_begin_ms);
    outcome := 'begun';
    job := to_jsonb(v_new);
    begun := v_lock->'result';
    event := v_lock->'events'->0; -- kiln_lock_node_row writes one event
    row_type := v_row.type;
  ELSIF v_mine THEN
    outcome := 'claimed';
    job := to_jsonb(v_new);
  ELSE
    outcome := 'queued';
  END IF;
END $$;

-- lib/db/functions/37_finish_emit.sql
-- kiln_finish_emit: step 7 of kiln_finish_node, its last: the transaction
-- commits lazily when every row it released or locked is of a lazy type
-- (kiln_commit_lazily), its events are numbered and stored (kiln_emit: the
-- stack's event lock, last in the lock order, held to commit), workers hear
-- of the jobs it queued (NOTIFY kiln_jobs), and the worker gets its reply. A
-- finish in a batch (kiln_finish_nodes) skips it: the batch does the same
-- once for all.
--
-- Takes: the stack's id, the events in order, whether it may commit lazily,
--   how many jobs it queued, the successors claimed ([{ job, begun }]) and
--   the traversal to settle (or NULL).
-- Returns: the reply, { outcome: 'ok', claimed, queued, settle }.
-- Assumes locked: whatever the finish locked; takes the event lock.
-- Writes: event rows; the transaction's synchronous_commit.
CREATE OR REPLACE FUNCTION kiln_finish_emit(p_stack uuid, p_events jsonb[], p_lazy boolean, p_queued int, p_claimed jsonb, p_settle uuid) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  -- The void calls below are assignments to it rather than PERFORMs: a
  -- PERFORM runs its call as a query, ~3 µs more per call (measured), and a
  -- finish makes these calls every time.
  v_void text;
BEGIN
  IF p_lazy THEN v_void := kiln_commit_lazily(); END IF;
  v_void := kiln_emit(p_stack, to_jsonb(p_events));
  IF p_queued > 0 THEN v_void := pg_notify('kiln_jobs', ''); END IF;
  RETURN jsonb_build_object('outcome', 'ok', 'claimed', p_claimed, 'queued', p_queued, 'settle', p_settle);
END $$;

-- lib/db/functions/38_finish_nodes.sql
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
  -- Every key looked up one by one (kiln_batch_jobs, 42_batch_jobs.sql).
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

-- lib/db/functions/41_replace_nodes.sql
-- kiln_replace_nodes: the replace calls one worker has ready at the same
-- moment, in one transaction: one commit and one turn at the stack's event
-- lock instead of one each (a replace-all's first layer sends ten at once,
-- which queued on that lock). Lock order (10_events.sql) across the batch:
-- the stacks, the old rows, then every sync point the calls write (each
-- node's, and a waiter's in the stack's current traversal), each set in key
-- order; each call inside takes only locks the batch holds (its new row is
-- its own). p_items: [{ job, spec }] (spec as for kiln_replace_node); returns
-- the results in the same order.
CREATE OR REPLACE FUNCTION kiln_replace_nodes(p_worker uuid, p_items jsonb) RETURNS jsonb LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_ids bigint[] := ARRAY(SELECT (e->>'job')::bigint FROM jsonb_array_elements(p_items) e);
  k record;
  v jsonb;
  v_item jsonb;
  v_out jsonb[] := '{}';
  v_ev_stacks uuid[] := '{}';
  v_ev_lists jsonb[] := '{}';
  v_lazy boolean := true;
  v_notify boolean := false;
  v_jobs job[];
BEGIN
  -- Every key looked up one by one (kiln_batch_jobs, 42_batch_jobs.sql).
  v_jobs := kiln_batch_jobs(v_ids, p_worker);
  PERFORM kiln_lock_batch(v_jobs);
  FOR k IN
    WITH it AS (
      SELECT j.traversal_id, s.current_traversal_id AS cur, coalesce(j.graph_key_id, j.resource_id) AS node,
             r.id AS rid, r.waiter_traversal_id AS wt, r.waiter_is_update AS wu
        FROM jsonb_array_elements(p_items) e
        JOIN unnest(v_jobs) j ON j.id = (e->>'job')::bigint
        CROSS JOIN LATERAL (SELECT s.current_traversal_id FROM stack s WHERE s.id = j.stack_id OFFSET 0) s
        CROSS JOIN LATERAL (SELECT r.id, r.waiter_traversal_id, r.waiter_is_update FROM resource r WHERE r.id = j.resource_id OFFSET 0) r
    ), keys AS (
      SELECT cur AS trav, node AS rid, true AS upd FROM it WHERE traversal_id = cur
      UNION SELECT cur, rid, wu FROM it WHERE wt = cur
    )
    SELECT trav, array_agg(rid) AS rids, array_agg(upd) AS upds FROM keys GROUP BY trav ORDER BY trav
  LOOP
    PERFORM kiln_lock_sync_points(k.trav, k.rids, k.upds);
  END LOOP;

  FOR v_item IN SELECT e FROM jsonb_array_elements(p_items) e LOOP
    v := kiln_replace_node((v_item->>'job')::bigint, p_worker, v_item->'spec', false);
    -- Lazily only when every call of the batch may (a 'gone' one wrote nothing, but says no).
    v_lazy := v_lazy AND coalesce((v->>'lazy')::boolean, false);
    v_notify := v_notify OR coalesce((v->>'notify')::boolean, false);
    IF v ? 'events' THEN
      v_ev_stacks := v_ev_stacks || (v->>'stack_id')::uuid;
      v_ev_lists := v_ev_lists || (v->'events');
    END IF;
    v_out := v_out || (v - 'events' - 'stack_id' - 'lazy' - 'notify');
  END LOOP;
  IF v_lazy THEN PERFORM kiln_commit_lazily(); END IF;
  PERFORM kiln_emit_each(kiln_events_by_stack(v_ev_stacks, v_ev_lists));
  IF v_notify THEN PERFORM pg_notify('kiln_jobs', ''); END IF;
  RETURN to_jsonb(v_out);
END $$;
