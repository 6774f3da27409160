-- kiln_wake: what p_key names happened (a signal was stored). Counts it and
-- makes the nodes parked on it ready; returns how many. Run in the
-- transaction that records what happened, so a woken node finds it.
CREATE OR REPLACE FUNCTION kiln_wake(p_key text) RETURNS int LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  v_n int;
BEGIN
  INSERT INTO wake (key, seq) VALUES (p_key, 1)
  ON CONFLICT (key) DO UPDATE SET seq = wake.seq + 1, updated_at = now();
  UPDATE job SET parked_until = NULL, wake_key = NULL WHERE wake_key = p_key;
  GET DIAGNOSTICS v_n = ROW_COUNT;
  IF v_n > 0 THEN PERFORM pg_notify('kiln_jobs', ''); END IF;
  RETURN v_n;
END $$;
