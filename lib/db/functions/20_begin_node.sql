-- kiln_begin_node: a worker that claimed a check_resource job asks to work on
-- its node. One round trip, one transaction, under the stack row lock:
--
--   1. the job's traversal must still be the stack's current one   -> else 'stale'
--   2. the node must be READY (not already taken or done)           -> else 'duplicate'
--   3. the traversal must not have failed or timed out              -> else 'skipped'
--   4. the resource row must be unlocked:
--        lease of the holder ran out -> break its lock (row FAILED), go on
--        update node, row being deleted by an older traversal -> 'replace_deleting'
--        held by a live worker      -> register as the row's waiter, 'blocked'
--                                      (the holder retriggers us when it lets go)
--   5. lock it (engine_id, lease, atomic_key+1), node RUNNING        -> 'locked'
--
-- Terminal outcomes delete the job; 'locked' keeps it until kiln_finish_node.

CREATE OR REPLACE FUNCTION kiln_predicted_action(p_row resource, p_is_update boolean, p_template uuid, p_stack_action text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN p_stack_action = 'CHECK' THEN 'CHECK'
    -- creating: a new row, or one whose create never completed (retried in place: idempotent physical names)
    WHEN p_is_update THEN CASE WHEN p_row.action = 'INIT' OR (p_row.action = 'CREATE' AND p_row.status = 'FAILED' AND p_row.properties IS NULL) THEN 'CREATE' END
    WHEN p_row.current_template_id IS DISTINCT FROM p_template AND NOT (p_row.action = 'DELETE' AND p_row.status = 'COMPLETE') THEN 'DELETE'
  END
$$;

CREATE OR REPLACE FUNCTION kiln_node_inputs(p_traversal uuid, p_rid int, p_is_update boolean) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT coalesce(jsonb_agg(payload ORDER BY sender_id, sender_is_update) FILTER (WHERE payload IS NOT NULL), '[]'::jsonb)
  FROM sync_input WHERE traversal_id = p_traversal AND resource_id = p_rid AND is_update = p_is_update
$$;

CREATE OR REPLACE FUNCTION kiln_begin_node(p_job bigint, p_worker uuid, p_lease_ms int) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  j job%ROWTYPE;
  s stack%ROWTYPE;
  t traversal%ROWTYPE;
  sp sync_point%ROWTYPE;
  r resource%ROWTYPE;
  v_key int;
  v_action text;
  v_before jsonb;
  v_events jsonb := '[]';
  v_node jsonb;
  v_row_found boolean;
BEGIN
  SELECT * INTO j FROM job WHERE id = p_job;
  IF NOT FOUND OR j.locked_by IS DISTINCT FROM p_worker THEN
    RETURN jsonb_build_object('outcome', 'gone');
  END IF;
  -- Every state change of a stack is serialised on its row: traversal starts,
  -- node begins and finishes. Held for this short transaction only.
  SELECT * INTO s FROM stack WHERE id = j.stack_id FOR NO KEY UPDATE;
  IF NOT FOUND OR s.current_traversal_id IS DISTINCT FROM j.traversal_id THEN
    DELETE FROM job WHERE id = p_job;
    RETURN jsonb_build_object('outcome', 'stale', 'current_traversal_id', s.current_traversal_id);
  END IF;

  SELECT * INTO t FROM traversal WHERE id = j.traversal_id;
  v_key := coalesce(j.graph_key_id, j.resource_id);
  v_node := jsonb_build_object('rid', v_key, 'update', j.is_update);
  SELECT * INTO sp FROM sync_point WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update;
  IF FOUND AND sp.state = 'RUNNING' AND sp.actor_id = j.resource_id THEN
    -- A retry of a call that committed but whose reply was lost: answer as before.
    SELECT * INTO r FROM resource WHERE id = j.resource_id;
    IF r.engine_id = p_worker AND r.lock_traversal_id = j.traversal_id THEN
      RETURN jsonb_build_object('outcome', 'locked', 'resource', to_jsonb(r),
        'inputs', kiln_node_inputs(j.traversal_id, v_key, j.is_update),
        'replaces_uuid', (SELECT x.uuid FROM resource x WHERE x.id = r.replaces),
        'stack', jsonb_build_object('id', s.id, 'name', s.name, 'action', s.action),
        'traversal', jsonb_build_object('id', t.id, 'action', t.action, 'raw_template_id', t.raw_template_id, 'deadline', t.deadline));
    END IF;
  END IF;
  IF NOT FOUND OR sp.state <> 'READY' OR (sp.actor_id IS NOT NULL AND sp.actor_id <> j.resource_id) THEN
    DELETE FROM job WHERE id = p_job;
    RETURN jsonb_build_object('outcome', 'duplicate', 'state', sp.state);
  END IF;

  IF t.failure_reason IS NULL AND t.deadline < now() THEN
    UPDATE traversal SET failure_reason = 'Timed out' WHERE id = t.id;
    t.failure_reason := 'Timed out';
    v_events := v_events || kiln_ev('stack', t.id, NULL, NULL, NULL, t.action, 'IN_PROGRESS', 'Timed out', jsonb_build_object('failing', true));
  END IF;

  SELECT * INTO r FROM resource WHERE id = j.resource_id FOR UPDATE;
  v_row_found := FOUND;

  IF t.failure_reason IS NOT NULL OR NOT v_row_found THEN
    -- Failure policy: once a node failed, nothing new is started.
    UPDATE sync_point SET state = 'SKIPPED', updated_at = now()
     WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update;
    DELETE FROM job WHERE id = p_job;
    IF NOT v_row_found AND t.failure_reason IS NULL THEN
      UPDATE traversal SET failure_reason = 'resource row ' || j.resource_id || ' vanished' WHERE id = t.id;
    END IF;
    v_events := v_events || kiln_ev('node', t.id, j.resource_id, r.name, NULL, NULL, NULL, 'skipped: the traversal is failing',
                                    v_node || jsonb_build_object('state', 'SKIPPED'));
    PERFORM kiln_emit(s.id, v_events);
    PERFORM kiln_maybe_finish_failed(s.id, t.id);
    RETURN jsonb_build_object('outcome', 'skipped');
  END IF;

  IF r.engine_id IS NOT NULL AND r.lease_expires_at < now() THEN
    -- The holder stopped heartbeating: break its lock. The row can no longer be
    -- trusted (the action may have half happened), so it is FAILED; an update
    -- node replaces it, a cleanup node deletes it.
    v_events := v_events || kiln_ev('lock', r.lock_traversal_id, r.id, r.name, r.physical_id, r.action, 'FAILED',
                                    'Worker went down during resource ' || r.action,
                                    jsonb_build_object('lock', 'broken', 'worker', r.engine_id));
    UPDATE resource SET engine_id = NULL, lock_traversal_id = NULL, lease_expires_at = NULL, status = 'FAILED',
           status_reason = 'Worker went down during resource ' || r.action, atomic_key = atomic_key + 1, updated_at = now()
     WHERE id = r.id RETURNING * INTO r;
  END IF;

  IF r.engine_id IS NOT NULL THEN
    IF j.is_update AND r.action = 'DELETE' AND r.status = 'IN_PROGRESS' THEN
      -- Do not wait for a delete this traversal would undo: create a replacement now.
      UPDATE sync_point SET state = 'RUNNING', actor_id = r.id, updated_at = now()
       WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update;
      PERFORM kiln_emit(s.id, v_events);
      RETURN jsonb_build_object('outcome', 'replace_deleting', 'resource', to_jsonb(r),
        'inputs', kiln_node_inputs(j.traversal_id, v_key, j.is_update),
        'replaces_uuid', (SELECT x.uuid FROM resource x WHERE x.id = r.replaces),
        'stack', jsonb_build_object('id', s.id, 'name', s.name, 'action', s.action),
        'traversal', jsonb_build_object('id', t.id, 'action', t.action, 'raw_template_id', t.raw_template_id, 'deadline', t.deadline));
    END IF;
    -- Held by a live worker of an older traversal: stop here. The holder
    -- retriggers this node when it lets go (kiln_retrigger_waiter). A newer
    -- traversal's node overwrites an older waiter: only the newest matters.
    UPDATE resource SET waiter_traversal_id = j.traversal_id, waiter_is_update = j.is_update WHERE id = r.id;
    UPDATE sync_point SET state = 'BLOCKED', updated_at = now()
     WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update;
    DELETE FROM job WHERE id = p_job;
    v_events := v_events || kiln_ev('node', t.id, r.id, r.name, r.physical_id, NULL, NULL,
      'blocked: locked by an older traversal',
      v_node || jsonb_build_object('state', 'BLOCKED', 'blocked_by', r.lock_traversal_id, 'holder', r.engine_id, 'lease_expires_at', r.lease_expires_at));
    PERFORM kiln_emit(s.id, v_events);
    RETURN jsonb_build_object('outcome', 'blocked', 'blocked_by', r.lock_traversal_id);
  END IF;

  v_action := kiln_predicted_action(r, j.is_update, t.raw_template_id, t.action);
  -- The engine decides from the state before this node touched the row.
  v_before := jsonb_build_object('action', r.action, 'status', r.status, 'status_reason', r.status_reason);
  UPDATE resource
     SET engine_id = p_worker, lock_traversal_id = j.traversal_id,
         lease_expires_at = now() + p_lease_ms * interval '1 millisecond',
         atomic_key = atomic_key + 1, last_traversal_id = j.traversal_id, updated_at = now(),
         action = coalesce(v_action, action),
         status = CASE WHEN v_action IS NULL THEN status ELSE 'IN_PROGRESS' END,
         status_reason = CASE WHEN v_action IS NULL THEN status_reason ELSE 'state changed' END
   WHERE id = r.id RETURNING * INTO r;
  UPDATE sync_point SET state = 'RUNNING', actor_id = r.id, updated_at = now()
   WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update;
  v_events := v_events || kiln_ev(CASE WHEN v_action IS NULL THEN 'node' ELSE 'resource' END, t.id, r.id, r.name, r.physical_id,
    CASE WHEN v_action IS NULL THEN NULL ELSE r.action END, CASE WHEN v_action IS NULL THEN NULL ELSE r.status END,
    CASE WHEN v_action IS NULL THEN 'running' ELSE 'state changed' END,
    v_node || jsonb_build_object('state', 'RUNNING', 'lock', 'acquired', 'worker', p_worker, 'lease_expires_at', r.lease_expires_at,
                                 'satisfied', sp.satisfied, 'required', sp.required));
  PERFORM kiln_emit(s.id, v_events);
  RETURN jsonb_build_object('outcome', 'locked', 'resource', to_jsonb(r) || v_before,
    'inputs', kiln_node_inputs(j.traversal_id, v_key, j.is_update),
        'replaces_uuid', (SELECT x.uuid FROM resource x WHERE x.id = r.replaces),
    'stack', jsonb_build_object('id', s.id, 'name', s.name, 'action', s.action),
    'traversal', jsonb_build_object('id', t.id, 'action', t.action, 'raw_template_id', t.raw_template_id, 'deadline', t.deadline));
END $$;
