-- kiln_ev: one event, as a jsonb object whose keys are the columns of `event`
-- (kiln_emit writes it). Every step gathers its events with it and publishes
-- them once, at its end.
--
-- STABLE, not IMMUTABLE, because jsonb_build_object is STABLE: PostgreSQL
-- inlines a SQL function into its caller only when the declared volatility
-- holds for its body; an IMMUTABLE one calling a STABLE function runs as a
-- separate SQL-function call (its own executor start) every time.
CREATE OR REPLACE FUNCTION kiln_ev(
  p_kind text, p_traversal uuid, p_resource_id int, p_name text, p_physical text,
  p_action text, p_status text, p_reason text, p_data jsonb
) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('kind', p_kind, 'traversal_id', p_traversal, 'resource_id', p_resource_id,
    'resource_name', p_name, 'physical_id', p_physical, 'action', p_action, 'status', p_status,
    'reason', coalesce(p_reason, ''), 'data', p_data)
$$;
