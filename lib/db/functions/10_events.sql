-- Events: append-only, numbered 1, 2, 3, … per stack without gaps.
--
-- Lock order of every engine transaction (no transaction ever waits for a lock
-- earlier in this list while holding a later one, so they cannot deadlock):
--
--   0. the worker's own row: its heartbeat, and a claim (kiln_claim_jobs) as
--      its first write;
--   1. the stack row: FOR SHARE by node steps (claim, begin, finish, replace,
--      mark, progress), which run side by side; FOR NO KEY UPDATE by
--      stack-level changes (start, cancel, settle, sweep), which run alone.
--      The first lock taken, but for a claim's own worker row.
--   2. resource rows: the node's own (and rows whose `replaces` points at it);
--      several only in id order (heartbeat, sweeper);
--   3. sync_point rows, several only at once in (traversal, resource,
--      is_update) order (kiln_lock_sync_points);
--   4. the traversal row (roots countdown, failure, time-out);
--   5. the stack's event-number lock (kiln_emit), once, last, held to commit.
--
-- A node begun inside another step (a finish or replacement continuing with
-- the node it made ready, a claim beginning what it claimed) already holds
-- later locks, so it never waits: every lock it needs is taken SKIP LOCKED and
-- anything it would wait for answers 'later' (the worker then begins it in a
-- transaction of its own).
--
-- Plans: every entry point of a node step runs with enable_seqscan = off. Its
-- statements are key lookups whose plans PL/pgSQL caches per connection; a
-- plan made while sync_input or sync_point was nearly empty (the start of a
-- traversal, or statistics from an idle moment) would otherwise stay a
-- sequential scan as the traversal grows the table: O(N) per node, O(N²) per
-- traversal (measured: 50 million rows read for a 10,000-node chain).
--
-- Numbers are handed out under (5), a transaction-level advisory lock per
-- stack, taken last and held to commit: numbers follow commit order, so a
-- client that has seen seq n never later finds a committed event with a smaller
-- number, while the rest of concurrent node steps runs in parallel. One NOTIFY
-- per transaction (PostgreSQL folds identical payloads) tells the web servers to
-- read the new rows; the payload is only the stack id.
--
-- Only for a followed stack (event_watch): PostgreSQL wakes every listening
-- connection of the database on every NOTIFY, whatever its channel (each
-- worker's LISTEN kiln_jobs backend too), and the signals are sent inside the
-- commit, before the step's reply; measured at ~10 % of a chain node's time.
-- kiln_watch_events registers a watch under the same per-stack lock, so a
-- step either sees the watch and notifies, or committed before the watcher
-- read the stack's last number.

-- kiln_emit: number p_events (a jsonb array of kiln_ev objects) after the
-- stack's last event and insert them; NOTIFY kiln_events when the stack is
-- followed. Takes the stack's event lock (5 above), so it is the last thing a
-- step does before it commits.
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
