-- kiln_replace_node: an update node found that its row must be replaced
-- (create-before-delete). In one transaction: insert the replacement row
-- (INIT, `replaces` = old), point the old row's `replaced_by` at it, release the
-- old row unchanged (it stays visible until its cleanup node deletes it), and
-- hand the node to a job for the new row. The new row *impersonates* the old
-- row's graph node: its successors and the stack hear from the node they wait for.
--
-- p_spec: { type, requires: [ids], reason, claim, begin_lease_ms, uuid }
-- uuid: the new row's, when the worker chose it (it starts a state-only
-- type's create under that identity while this call runs: check-resource.ts,
-- "head start"); otherwise a fresh one.
-- With claim and begin_lease_ms the new row is also begun (locked, RUNNING) in
-- this transaction, as kiln_finish_node does for a successor.
-- lazy_types (the worker's state-only types, 05_commit_lazily.sql): when the old row,
-- the new one and whatever was begun are all of them, the call commits
-- without waiting for the disk, as a finish does. It used to wait: the replace
-- calls of a replace-all queued on the stack's event lock, each holding it
-- through a flush (layered-1000: 15 ms of lock wait per node, --profile).
--
-- With p_emit false (kiln_replace_nodes), the sync points are already locked
-- and the events, the need to notify and whether the call may commit lazily
-- are returned (`stack_id`, `events`, `notify`, `lazy`) for the batch.

CREATE OR REPLACE FUNCTION kiln_replace_node(p_job bigint, p_worker uuid, p_spec jsonb, p_emit boolean DEFAULT true) RETURNS jsonb LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  j job%ROWTYPE;
  s stack%ROWTYPE;
  t traversal%ROWTYPE;
  r resource%ROWTYPE;
  v_new resource%ROWTYPE;
  v_job job%ROWTYPE;
  v_claim boolean := coalesce((p_spec->>'claim')::boolean, false);
  v_key int;
  v_events jsonb := '[]';
  v_ev jsonb;
  v_waiter_trav uuid;
  v_waiter_upd boolean;
  v_begin jsonb;
  v_lazy_types jsonb := p_spec->'lazy_types';
  v_lazy boolean;
  v_notify boolean;
BEGIN
  SELECT * INTO j FROM job WHERE id = p_job;
  IF NOT FOUND OR j.locked_by IS DISTINCT FROM p_worker THEN RETURN jsonb_build_object('outcome', 'gone'); END IF;
  SELECT * INTO s FROM stack WHERE id = j.stack_id FOR SHARE;
  SELECT * INTO r FROM resource WHERE id = j.resource_id FOR UPDATE;
  IF r.engine_id IS DISTINCT FROM p_worker THEN
    DELETE FROM job WHERE id = p_job;
    RETURN jsonb_build_object('outcome', 'lock_lost');
  END IF;
  v_key := coalesce(j.graph_key_id, j.resource_id);
  v_waiter_trav := r.waiter_traversal_id;
  v_waiter_upd := r.waiter_is_update;
  UPDATE resource SET engine_id = NULL, lock_traversal_id = NULL, lease_expires_at = NULL,
         waiter_traversal_id = NULL, waiter_is_update = NULL, atomic_key = atomic_key + 1, updated_at = now()
   WHERE id = r.id;
  DELETE FROM job WHERE id = p_job;

  IF s.current_traversal_id IS DISTINCT FROM j.traversal_id THEN
    -- Superseded while we were deciding: the newer traversal decides for itself.
    v_ev := kiln_retrigger_waiter(s, r.id, v_waiter_trav, v_waiter_upd);
    IF NOT p_emit THEN
      RETURN jsonb_build_object('outcome', 'stale', 'stack_id', s.id, 'events', CASE WHEN v_ev IS NULL THEN '[]'::jsonb ELSE jsonb_build_array(v_ev) END, 'notify', v_ev IS NOT NULL);
    END IF;
    IF v_ev IS NOT NULL THEN
      PERFORM kiln_emit(s.id, jsonb_build_array(v_ev));
      PERFORM pg_notify('kiln_jobs', '');
    END IF;
    RETURN jsonb_build_object('outcome', 'stale');
  END IF;

  SELECT * INTO t FROM traversal WHERE id = j.traversal_id;
  INSERT INTO resource (uuid, stack_id, name, type, action, status, current_template_id, requires, replaces, last_traversal_id)
  VALUES (coalesce((p_spec->>'uuid')::uuid, gen_random_uuid()), s.id, r.name, coalesce(p_spec->>'type', r.type), 'INIT', 'COMPLETE', t.raw_template_id,
          ARRAY(SELECT jsonb_array_elements_text(coalesce(p_spec->'requires', '[]'))::int), r.id, t.id)
  RETURNING * INTO v_new;
  UPDATE resource SET replaced_by = v_new.id, atomic_key = atomic_key + 1 WHERE id = r.id;
  IF p_emit THEN
    PERFORM kiln_lock_sync_points(t.id, ARRAY[v_key, CASE WHEN v_waiter_trav = t.id THEN r.id END], ARRAY[true, v_waiter_upd]);
  END IF;
  UPDATE sync_point SET state = 'READY', actor_id = v_new.id, updated_at = now()
   WHERE traversal_id = t.id AND resource_id = v_key AND is_update = true;
  INSERT INTO job (kind, stack_id, project_id, traversal_id, resource_id, is_update, graph_key_id, locked_by, locked_at, attempts)
  VALUES ('check_resource', s.id, s.project_id, t.id, v_new.id, true, v_key,
          CASE WHEN v_claim THEN p_worker END, CASE WHEN v_claim THEN now() END, CASE WHEN v_claim THEN 1 ELSE 0 END)
  RETURNING * INTO v_job;
  v_events := v_events || kiln_ev('node', t.id, r.id, r.name, r.physical_id, NULL, NULL,
    'replaced: ' || coalesce(p_spec->>'reason', 'replacement required'),
    jsonb_build_object('rid', v_key, 'update', true, 'state', 'READY', 'replaced_by', v_new.id, 'lock', 'released'));
  v_ev := kiln_retrigger_waiter(s, r.id, v_waiter_trav, v_waiter_upd);
  IF v_ev IS NOT NULL THEN v_events := v_events || v_ev; END IF;
  IF v_claim AND p_spec ? 'begin_lease_ms' THEN
    v_begin := kiln_begin_core(v_job.id, p_worker, (p_spec->>'begin_lease_ms')::int, true);
    v_events := v_events || (v_begin->'events');
  END IF;
  v_lazy := coalesce(v_lazy_types ? r.type AND v_lazy_types ? v_new.type, false)
            AND (v_begin IS NULL OR kiln_begun_lazily(v_begin->'result', v_lazy_types));
  v_notify := NOT v_claim OR v_ev IS NOT NULL;
  IF NOT p_emit THEN
    RETURN jsonb_build_object('outcome', 'ok', 'replacement', to_jsonb(v_new), 'claimed', CASE WHEN v_claim THEN to_jsonb(v_job) END,
      'begun', v_begin->'result', 'settle', v_begin->'settle', 'stack_id', s.id, 'events', v_events, 'notify', v_notify, 'lazy', v_lazy);
  END IF;
  IF v_lazy THEN PERFORM kiln_commit_lazily(); END IF;
  PERFORM kiln_emit(s.id, v_events);
  IF v_notify THEN PERFORM pg_notify('kiln_jobs', ''); END IF;
  RETURN jsonb_build_object('outcome', 'ok', 'replacement', to_jsonb(v_new), 'claimed', CASE WHEN v_claim THEN to_jsonb(v_job) END,
    'begun', v_begin->'result', 'settle', v_begin->'settle');
END $$;
