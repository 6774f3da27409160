-- lib/db/functions/54_node_hook.sql
-- kiln_node_hook: a node reached a hook its environment sets (pre-create,
-- pre-update, pre-delete; lib/template/hooks.ts) and is about to park until
-- it is cleared. Its resource event carries Heat's reason ("CREATE paused
-- until Hook pre-create is cleared"), by which `openstack stack hook poll`
-- finds it, and the row's action and status as they are (Heat's too: the
-- row has not started its action). Written before the park, so a clear that
-- comes in between finds the hook pending (kiln_clear_hook).
CREATE OR REPLACE FUNCTION kiln_node_hook(p_job bigint, p_worker uuid, p_hook text, p_reason text) RETURNS void LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  j job%ROWTYPE;
  r resource%ROWTYPE;
BEGIN
  SELECT * INTO j FROM job WHERE id = p_job;
  IF NOT FOUND OR j.locked_by IS DISTINCT FROM p_worker THEN RETURN; END IF;
  PERFORM 1 FROM stack WHERE id = j.stack_id FOR SHARE;
  SELECT * INTO r FROM resource WHERE id = j.resource_id;
  PERFORM kiln_emit(j.stack_id, jsonb_build_array(kiln_ev('resource', j.traversal_id, r.id, r.name, r.physical_id, r.action, r.status, p_reason,
    jsonb_build_object('hook', p_hook, 'hook_state', 'paused'))));
END $$;

-- kiln_clear_hook: clear the hook a node of the stack's current traversal
-- waits at (Heat's signal {"unset_hook": "pre-create"}): its resource event
-- ("Hook pre-create is cleared"), the signal its park waits for, and the
-- wake, in one transaction. Returns false, changing nothing, when no node of
-- that resource is at that hook (the latest of its hook events in the
-- traversal is not a pause).
CREATE OR REPLACE FUNCTION kiln_clear_hook(p_stack uuid, p_resource text, p_hook text) RETURNS boolean LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  s stack%ROWTYPE;
  e event%ROWTYPE;
  v_handle text;
BEGIN
  SELECT * INTO s FROM stack WHERE id = p_stack FOR SHARE;
  -- The handle the node waits on (lib/template/hooks.ts, hookHandle).
  v_handle := 'hook ' || p_hook || ' ' || s.current_traversal_id::text || ' ' || p_resource;
  PERFORM pg_advisory_xact_lock(hashtextextended(p_stack::text || '/' || v_handle, 0));
  SELECT * INTO e FROM event
   WHERE stack_id = p_stack AND traversal_id = s.current_traversal_id AND kind = 'resource' AND resource_name = p_resource
     AND data->>'hook' = p_hook
   ORDER BY seq DESC LIMIT 1;
  IF NOT FOUND OR e.data->>'hook_state' <> 'paused' THEN RETURN false; END IF;
  INSERT INTO resource_signal (stack_id, handle, signal_id, status, reason, data)
  VALUES (p_stack, v_handle, 'unset_hook', 'SUCCESS', 'Hook ' || p_hook || ' is cleared', 'null')
  ON CONFLICT (stack_id, handle, signal_id) DO UPDATE SET created_at = now();
  PERFORM kiln_emit(p_stack, jsonb_build_array(kiln_ev('resource', s.current_traversal_id, e.resource_id, e.resource_name, e.physical_id, e.action, e.status,
    'Hook ' || p_hook || ' is cleared', jsonb_build_object('hook', p_hook, 'hook_state', 'cleared'))));
  PERFORM kiln_wake('signal ' || p_stack::text || ' ' || v_handle);
  RETURN true;
END $$;
