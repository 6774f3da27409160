-- kiln_locked_reply: what a locked node needs to run (row, inputs, scope),
-- the reply of every begin that locks a row (kiln_lock_node_row, a retried
-- begin in kiln_begin_core, kiln_resume_node). Reads only.
CREATE OR REPLACE FUNCTION kiln_locked_reply(p_outcome text, p_row jsonb, p_s stack, p_t traversal, p_key int, p_upd boolean) RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN jsonb_build_object('outcome', p_outcome, 'resource', p_row,
    'inputs', kiln_node_inputs(p_t.id, p_key, p_upd),
    'replaces_uuid', (SELECT x.uuid FROM resource x WHERE x.id = (p_row->>'replaces')::int),
    'stack', jsonb_build_object('id', p_s.id, 'name', p_s.name, 'action', p_s.action),
    'traversal', jsonb_build_object('id', p_t.id, 'action', p_t.action, 'raw_template_id', p_t.raw_template_id, 'deadline', p_t.deadline));
END $$;

-- kiln_node_inputs: the payloads a node's predecessors reported (its
-- sync_input rows), in sender order.
-- PL/pgSQL rather than SQL for the helpers of a node step: PostgreSQL runs a
-- SQL function it cannot inline (an aggregate, a subquery) through a fresh
-- executor on every call, measured at ~60 µs more than the same body here.
CREATE OR REPLACE FUNCTION kiln_node_inputs(p_traversal uuid, p_rid int, p_is_update boolean) RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (SELECT coalesce(jsonb_agg(payload ORDER BY sender_id, sender_is_update) FILTER (WHERE payload IS NOT NULL), '[]'::jsonb)
            FROM sync_input WHERE traversal_id = p_traversal AND resource_id = p_rid AND is_update = p_is_update);
END $$;
