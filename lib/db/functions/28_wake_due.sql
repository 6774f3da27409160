-- kiln_wake_due: parked nodes whose time is up become ready (marked `due`:
-- the action learns its wait is over from the database's clock, not from its
-- worker's); returns how many.
CREATE OR REPLACE FUNCTION kiln_wake_due() RETURNS int LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  v_n int;
BEGIN
  UPDATE job SET parked_until = NULL, wake_key = NULL, park = park || '{"due": true}'
   WHERE id IN (SELECT id FROM job WHERE parked_until <= now() ORDER BY id FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS v_n = ROW_COUNT;
  IF v_n > 0 THEN PERFORM pg_notify('kiln_jobs', ''); END IF;
  RETURN v_n;
END $$;
