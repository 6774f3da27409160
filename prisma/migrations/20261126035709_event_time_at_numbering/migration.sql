-- lib/db/functions/10_events.sql
CREATE OR REPLACE FUNCTION kiln_emit(p_stack uuid, p_events jsonb) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_n int := coalesce(jsonb_array_length(p_events), 0);
  v_last bigint;
  v_at timestamptz;
BEGIN
  IF v_n = 0 THEN RETURN; END IF;
  -- 0x4b494c4e = 'KILN': the advisory lock class of event numbering.
  PERFORM pg_advisory_xact_lock(1263094862, hashtext(p_stack::text));
  SELECT coalesce(max(seq), 0) INTO v_last FROM event WHERE stack_id = p_stack;
  -- An event's time is when it is numbered (under the lock, held to commit), not
  -- when its transaction began (now()): times then follow seq order, as replay by
  -- time expects, and a client measures "committed -> seen" from its commit.
  v_at := clock_timestamp();
  -- jsonb_populate_recordset maps the keys of kiln_ev to columns in one call
  -- (a JSON null becomes NULL), cheaper than extracting each field.
  INSERT INTO event (stack_id, seq, traversal_id, kind, resource_id, resource_name, physical_id, action, status, reason, data, created_at)
  SELECT p_stack, v_last + e.ordinality, e.traversal_id, e.kind, e.resource_id, e.resource_name, e.physical_id, e.action, e.status,
         coalesce(e.reason, ''), e.data, v_at
  FROM jsonb_populate_recordset(NULL::event, p_events) WITH ORDINALITY AS e;
  IF EXISTS (SELECT 1 FROM event_watch
              WHERE stack_id IN (p_stack, '00000000-0000-0000-0000-000000000000') AND expires_at > now()) THEN
    PERFORM pg_notify('kiln_events', p_stack::text);
  END IF;
END $$;
