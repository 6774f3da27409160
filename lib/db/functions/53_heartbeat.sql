-- kiln_heartbeat: a worker proves it is alive and extends the leases of the locks it holds.
-- Only the rows the worker says it is acting on are extended, so a lock it
-- forgot (a bug) still expires and is swept.
CREATE OR REPLACE FUNCTION kiln_heartbeat(p_worker uuid, p_lease_ms int, p_rows int[]) RETURNS int LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_n int;
BEGIN
  UPDATE worker SET heartbeat_at = now(), state = CASE WHEN state = 'dead' THEN 'running' ELSE state END
   WHERE id = p_worker AND stopped_at IS NULL;
  IF NOT FOUND THEN RETURN -1; END IF;
  -- Rows in id order, as every other multi-row lock of resource rows.
  UPDATE resource SET lease_expires_at = now() + p_lease_ms * interval '1 millisecond'
   WHERE id IN (SELECT id FROM resource WHERE engine_id = p_worker AND id = ANY(p_rows) ORDER BY id FOR UPDATE);
  GET DIAGNOSTICS v_n = ROW_COUNT;
  RETURN v_n;
END $$;
