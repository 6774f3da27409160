-- Events: append-only, numbered 1, 2, 3, … per stack without gaps.
--
-- Callers hold the stack row lock (every engine function takes it first), so
-- sequence numbers are assigned in commit order: a client that has seen seq n
-- can never later find a committed event with a smaller number. One NOTIFY per
-- transaction (PostgreSQL folds identical payloads) tells the web servers to
-- read the new rows; the payload is only the stack id.

CREATE OR REPLACE FUNCTION kiln_ev(
  p_kind text, p_traversal uuid, p_resource_id int, p_name text, p_physical text,
  p_action text, p_status text, p_reason text, p_data jsonb
) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object('kind', p_kind, 'traversal_id', p_traversal, 'resource_id', p_resource_id,
    'resource_name', p_name, 'physical_id', p_physical, 'action', p_action, 'status', p_status,
    'reason', coalesce(p_reason, ''), 'data', p_data)
$$;

CREATE OR REPLACE FUNCTION kiln_emit(p_stack uuid, p_events jsonb) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_n int := jsonb_array_length(p_events);
  v_last bigint;
BEGIN
  IF v_n = 0 THEN RETURN; END IF;
  UPDATE stack SET event_seq = event_seq + v_n WHERE id = p_stack RETURNING event_seq INTO v_last;
  INSERT INTO event (stack_id, seq, traversal_id, kind, resource_id, resource_name, physical_id, action, status, reason, data)
  SELECT p_stack, v_last - v_n + e.ord, (e.v->>'traversal_id')::uuid, e.v->>'kind', (e.v->>'resource_id')::int,
         e.v->>'resource_name', e.v->>'physical_id', e.v->>'action', e.v->>'status', coalesce(e.v->>'reason', ''),
         CASE WHEN jsonb_typeof(e.v->'data') = 'null' THEN NULL ELSE e.v->'data' END
  FROM jsonb_array_elements(p_events) WITH ORDINALITY AS e(v, ord);
  PERFORM pg_notify('kiln_events', p_stack::text);
END $$;
