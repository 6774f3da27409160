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

-- Lazy commits. The worker names its state-only resource types (p_result /
-- p_lazy_types 'lazy_types': types whose actions change nothing outside this
-- database, such as OS::Heat::TestResource, None, Value, RandomString). A node
-- step whose every row is of such a type — the row it releases and every row
-- it locks for a node it begins — commits with synchronous_commit off:
-- PostgreSQL answers before the WAL reaches the disk (it does within
-- 3 × wal_writer_delay). A database crash in that window loses the last such
-- steps, all of them after a point in commit order: the rows and sync points go
-- back to where they were and the nodes re-run (the sweeper, broken leases);
-- nothing outside the database was made that could leak or be made twice. A
-- step that records or starts an action on anything else waits for the disk
-- as always, and its flush carries every earlier lazy commit with it.
-- Measured: the flush is ~0.55 ms of a chain node's ~2.2 ms.
CREATE OR REPLACE FUNCTION kiln_commit_lazily() RETURNS void LANGUAGE sql AS $$
  SELECT set_config('synchronous_commit', 'off', true)
$$;

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

-- A row's `<action>_IN_PROGRESS` event while its node runs: written by
-- kiln_mark_in_progress, or by kiln_finish_node for an action too quick to mark.
CREATE OR REPLACE FUNCTION kiln_in_progress_ev(p_trav uuid, p_row resource, p_action text, p_rid int, p_upd boolean)
RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT kiln_ev('resource', p_trav, p_row.id, p_row.name, p_row.physical_id, p_action, 'IN_PROGRESS', 'state changed',
                 jsonb_build_object('rid', p_rid, 'update', p_upd, 'state', 'RUNNING'))
$$;

-- The last event number of a stack (0 before the first event).
CREATE OR REPLACE FUNCTION kiln_last_seq(p_stack uuid) RETURNS bigint LANGUAGE sql STABLE AS $$
  SELECT coalesce(max(seq), 0) FROM event WHERE stack_id = p_stack
$$;

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

-- Events of several stacks gathered in one transaction (a claim, a batch of
-- finishes) as {stack_id: [event, …]}, published per stack in stack-id order:
-- the event lock comes last and is taken in one order. Built once from what
-- the step gathered as two arrays (p_lists[i] is the jsonb array of events of
-- p_stacks[i]), not merged item by item: each merge re-encoded the whole
-- growing object.
CREATE OR REPLACE FUNCTION kiln_events_by_stack(p_stacks uuid[], p_lists jsonb[]) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT coalesce(jsonb_object_agg(st, evs), '{}') FROM (
    SELECT u.st::text AS st, jsonb_agg(x.e ORDER BY u.n, x.m) AS evs
      FROM unnest(p_stacks, p_lists) WITH ORDINALITY u(st, list, n)
     CROSS JOIN LATERAL jsonb_array_elements(u.list) WITH ORDINALITY x(e, m)
     GROUP BY u.st) z
$$;

CREATE OR REPLACE FUNCTION kiln_emit_each(p_by_stack jsonb) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_stack text;
BEGIN
  FOR v_stack IN SELECT k FROM jsonb_object_keys(p_by_stack) k ORDER BY k::uuid LOOP
    PERFORM kiln_emit(v_stack::uuid, p_by_stack->v_stack);
  END LOOP;
END $$;
