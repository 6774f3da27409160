-- kiln_notify_settled: a stack left IN_PROGRESS: NOTIFY kiln_stack
-- '{stack_id, traversal_id, action, status}', for whoever waits for an
-- operation to end (the bench; scripts) without reading every event.
CREATE OR REPLACE FUNCTION kiln_notify_settled(p_stack uuid, p_trav uuid, p_action text, p_status text) RETURNS void LANGUAGE sql AS $$
  SELECT pg_notify('kiln_stack', json_build_object('stack_id', p_stack, 'traversal_id', p_trav, 'action', p_action, 'status', p_status)::text)
$$;
