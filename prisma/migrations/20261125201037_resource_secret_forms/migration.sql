-- AlterTable
ALTER TABLE "resource" ADD COLUMN     "secret_forms" TEXT[] DEFAULT ARRAY[]::TEXT[];

-- lib/db/functions/30_finish_node.sql
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
            INSERT INTO job (kind, stack_id, traversal_id, resource_id, is_update, locked_by, locked_at, attempts)
            VALUES ('check_resource', s.id, t.id, v_srid, v_supd,
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
