-- kiln_lock_node_row: the last step of a begin, shared by kiln_begin_core and
-- the finish that begins a successor it made ready (kiln_claim_successor):
-- lock the (unlocked) row for the worker
-- (engine_id, lease, atomic_key+1; `<action>_IN_PROGRESS` when the action is
-- known now), node RUNNING, its event, and what the worker needs to run it.
-- The caller holds the row and the sync point. Returns { result, events }.
CREATE OR REPLACE FUNCTION kiln_lock_node_row(p_r resource, p_s stack, p_t traversal, p_key int, p_upd boolean, p_sp sync_point, p_worker uuid, p_lease_ms int)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  r resource%ROWTYPE;
  v_action text := kiln_predicted_action(p_r, p_upd, p_t.raw_template_id, p_t.action);
  -- The engine decides from the state before this node touched the row.
  v_before jsonb := jsonb_build_object('action', p_r.action, 'status', p_r.status, 'status_reason', p_r.status_reason);
BEGIN
  UPDATE resource
     SET engine_id = p_worker, lock_traversal_id = p_t.id,
         lease_expires_at = now() + p_lease_ms * interval '1 millisecond',
         atomic_key = atomic_key + 1, last_traversal_id = p_t.id, updated_at = now(),
         action = coalesce(v_action, action),
         status = CASE WHEN v_action IS NULL THEN status ELSE 'IN_PROGRESS' END,
         status_reason = CASE WHEN v_action IS NULL THEN status_reason ELSE 'state changed' END
   WHERE id = p_r.id RETURNING * INTO r;
  UPDATE sync_point SET state = 'RUNNING', actor_id = r.id, updated_at = now()
   WHERE traversal_id = p_t.id AND resource_id = p_key AND is_update = p_upd;
  RETURN jsonb_build_object(
    'result', kiln_locked_reply('locked', to_jsonb(r) || v_before, p_s, p_t, p_key, p_upd),
    'events', jsonb_build_array(kiln_ev(CASE WHEN v_action IS NULL THEN 'node' ELSE 'resource' END, p_t.id, r.id, r.name, r.physical_id,
      CASE WHEN v_action IS NULL THEN NULL ELSE r.action END, CASE WHEN v_action IS NULL THEN NULL ELSE r.status END,
      CASE WHEN v_action IS NULL THEN 'running' ELSE 'state changed' END,
      jsonb_build_object('rid', p_key, 'update', p_upd, 'state', 'RUNNING', 'lock', 'acquired', 'worker', p_worker,
                         'lease_expires_at', r.lease_expires_at, 'satisfied', p_sp.satisfied, 'required', p_sp.required))));
END $$;
