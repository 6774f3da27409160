-- kiln_watch_events: p_watcher follows p_stacks (the nil uuid: every stack)
-- for p_ttl_ms more; returns each stack's last event number. Each stack's
-- event lock is taken first (in stack-id order, as kiln_emit_each does): a
-- step that is numbering events for it commits before the number is read, and
-- every later step sees the watch. Rows expired long ago (a web server that
-- went away) are removed on the way, skipping any another watcher holds.
CREATE OR REPLACE FUNCTION kiln_watch_events(p_watcher uuid, p_stacks uuid[], p_ttl_ms int)
RETURNS TABLE (stack_id uuid, last_seq bigint) LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(1263094862, hashtext(s::text)) FROM (SELECT DISTINCT unnest(p_stacks) AS s ORDER BY 1) k;
  DELETE FROM event_watch w WHERE (w.stack_id, w.watcher) IN (
    SELECT x.stack_id, x.watcher FROM event_watch x WHERE x.expires_at < now() - interval '10 minutes' FOR UPDATE SKIP LOCKED);
  INSERT INTO event_watch (stack_id, watcher, expires_at)
  SELECT DISTINCT s, p_watcher, now() + p_ttl_ms * interval '1 millisecond' FROM unnest(p_stacks) s
  ON CONFLICT ON CONSTRAINT event_watch_pkey DO UPDATE SET expires_at = EXCLUDED.expires_at;
  RETURN QUERY SELECT DISTINCT s, kiln_last_seq(s) FROM unnest(p_stacks) s;
END $$;
