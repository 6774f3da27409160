-- CreateSchema
CREATE SCHEMA IF NOT EXISTS "public";

-- CreateTable
CREATE TABLE "project" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "name" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "project_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "api_token" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "project_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "token_hash" TEXT NOT NULL,
    "prefix" TEXT NOT NULL,
    "role" TEXT NOT NULL DEFAULT 'member',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3),
    "revoked_at" TIMESTAMPTZ(3),
    "last_used_at" TIMESTAMPTZ(3),

    CONSTRAINT "api_token_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "session" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "token_id" UUID NOT NULL,
    "session_hash" TEXT NOT NULL,
    "csrf_token" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "session_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "raw_template" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "stack_id" UUID NOT NULL,
    "source" TEXT NOT NULL,
    "template" JSONB NOT NULL,
    "environment" JSONB NOT NULL DEFAULT '{}',
    "parameters" JSONB NOT NULL DEFAULT '{}',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "raw_template_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "stack" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "project_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "action" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "status_reason" TEXT NOT NULL DEFAULT '',
    "current_traversal_id" UUID,
    "raw_template_id" UUID,
    "prev_raw_template_id" UUID,
    "last_good_template_id" UUID,
    "timeout_mins" INTEGER NOT NULL,
    "disable_rollback" BOOLEAN NOT NULL DEFAULT true,
    "created_by" TEXT NOT NULL DEFAULT '',
    "tags" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3),
    "deleted_at" TIMESTAMPTZ(3),

    CONSTRAINT "stack_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "traversal" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "stack_id" UUID NOT NULL,
    "action" TEXT NOT NULL,
    "raw_template_id" UUID NOT NULL,
    "started_by" TEXT NOT NULL DEFAULT '',
    "started_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "deadline" TIMESTAMPTZ(3) NOT NULL,
    "ended_at" TIMESTAMPTZ(3),
    "outcome" TEXT,
    "outcome_reason" TEXT NOT NULL DEFAULT '',
    "superseded_by_id" UUID,
    "failure_reason" TEXT,
    "node_count" INTEGER NOT NULL,
    "roots_pending" INTEGER NOT NULL,

    CONSTRAINT "traversal_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "traversal_graph" (
    "traversal_id" UUID NOT NULL,
    "graph" JSONB NOT NULL,

    CONSTRAINT "traversal_graph_pkey" PRIMARY KEY ("traversal_id")
);

-- CreateTable
CREATE TABLE "resource" (
    "id" SERIAL NOT NULL,
    "uuid" UUID NOT NULL DEFAULT gen_random_uuid(),
    "stack_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "action" TEXT NOT NULL DEFAULT 'INIT',
    "status" TEXT NOT NULL DEFAULT 'COMPLETE',
    "status_reason" TEXT NOT NULL DEFAULT '',
    "physical_id" TEXT,
    "current_template_id" UUID,
    "requires" INTEGER[] DEFAULT ARRAY[]::INTEGER[],
    "replaces" INTEGER,
    "replaced_by" INTEGER,
    "properties" JSONB,
    "pending_properties" JSONB,
    "attributes" JSONB,
    "data" JSONB,
    "deletion_policy" TEXT NOT NULL DEFAULT 'Delete',
    "atomic_key" INTEGER NOT NULL DEFAULT 0,
    "engine_id" UUID,
    "lock_traversal_id" UUID,
    "lease_expires_at" TIMESTAMPTZ(3),
    "waiter_traversal_id" UUID,
    "waiter_is_update" BOOLEAN,
    "last_traversal_id" UUID,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "resource_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "sync_point" (
    "traversal_id" UUID NOT NULL,
    "resource_id" INTEGER NOT NULL,
    "is_update" BOOLEAN NOT NULL,
    "stack_id" UUID NOT NULL,
    "required" INTEGER NOT NULL,
    "satisfied" INTEGER NOT NULL DEFAULT 0,
    "state" TEXT NOT NULL DEFAULT 'WAITING',
    "actor_id" INTEGER,
    "successors" JSONB,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "sync_point_pkey" PRIMARY KEY ("traversal_id","resource_id","is_update")
);

-- CreateTable
CREATE TABLE "sync_input" (
    "traversal_id" UUID NOT NULL,
    "resource_id" INTEGER NOT NULL,
    "is_update" BOOLEAN NOT NULL,
    "sender_id" INTEGER NOT NULL,
    "sender_is_update" BOOLEAN NOT NULL,
    "payload" JSONB,

    CONSTRAINT "sync_input_pkey" PRIMARY KEY ("traversal_id","resource_id","is_update","sender_id","sender_is_update")
);

-- CreateTable
CREATE TABLE "job" (
    "id" BIGSERIAL NOT NULL,
    "kind" TEXT NOT NULL,
    "stack_id" UUID NOT NULL,
    "traversal_id" UUID,
    "resource_id" INTEGER,
    "is_update" BOOLEAN,
    "graph_key_id" INTEGER,
    "payload" JSONB,
    "run_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "locked_by" UUID,
    "locked_at" TIMESTAMPTZ(3),
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "job_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "event" (
    "id" BIGSERIAL NOT NULL,
    "stack_id" UUID NOT NULL,
    "seq" BIGINT NOT NULL,
    "traversal_id" UUID,
    "kind" TEXT NOT NULL,
    "resource_id" INTEGER,
    "resource_name" TEXT,
    "physical_id" TEXT,
    "action" TEXT,
    "status" TEXT,
    "reason" TEXT NOT NULL DEFAULT '',
    "data" JSONB,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "event_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "event_watch" (
    "stack_id" UUID NOT NULL,
    "watcher" UUID NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "event_watch_pkey" PRIMARY KEY ("stack_id","watcher")
);

-- CreateTable
CREATE TABLE "worker" (
    "id" UUID NOT NULL,
    "hostname" TEXT NOT NULL,
    "pid" INTEGER NOT NULL,
    "state" TEXT NOT NULL,
    "concurrency" INTEGER NOT NULL,
    "version" TEXT NOT NULL DEFAULT '',
    "started_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "heartbeat_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "stopped_at" TIMESTAMPTZ(3),
    "last_claim_at" TIMESTAMPTZ(3),

    CONSTRAINT "worker_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "project_name_key" ON "project"("name");

-- CreateIndex
CREATE UNIQUE INDEX "api_token_token_hash_key" ON "api_token"("token_hash");

-- CreateIndex
CREATE INDEX "api_token_project_id_idx" ON "api_token"("project_id");

-- CreateIndex
CREATE UNIQUE INDEX "session_session_hash_key" ON "session"("session_hash");

-- CreateIndex
CREATE INDEX "session_token_id_idx" ON "session"("token_id");

-- CreateIndex
CREATE INDEX "raw_template_stack_id_idx" ON "raw_template"("stack_id");

-- CreateIndex
CREATE INDEX "stack_project_id_deleted_at_idx" ON "stack"("project_id", "deleted_at");

-- CreateIndex
CREATE INDEX "stack_status_idx" ON "stack"("status");

-- CreateIndex
CREATE INDEX "traversal_stack_id_started_at_idx" ON "traversal"("stack_id", "started_at");

-- CreateIndex
CREATE INDEX "traversal_outcome_deadline_idx" ON "traversal"("outcome", "deadline");

-- CreateIndex
CREATE UNIQUE INDEX "resource_uuid_key" ON "resource"("uuid");

-- CreateIndex
CREATE INDEX "resource_stack_id_name_idx" ON "resource"("stack_id", "name");

-- CreateIndex
CREATE INDEX "job_locked_by_idx" ON "job"("locked_by");

-- CreateIndex
CREATE INDEX "job_stack_id_traversal_id_idx" ON "job"("stack_id", "traversal_id");

-- CreateIndex
CREATE UNIQUE INDEX "event_stack_id_seq_key" ON "event"("stack_id", "seq");

-- CreateIndex
CREATE INDEX "worker_heartbeat_at_idx" ON "worker"("heartbeat_at");

-- AddForeignKey
ALTER TABLE "api_token" ADD CONSTRAINT "api_token_project_id_fkey" FOREIGN KEY ("project_id") REFERENCES "project"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "session" ADD CONSTRAINT "session_token_id_fkey" FOREIGN KEY ("token_id") REFERENCES "api_token"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "raw_template" ADD CONSTRAINT "raw_template_stack_id_fkey" FOREIGN KEY ("stack_id") REFERENCES "stack"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "stack" ADD CONSTRAINT "stack_project_id_fkey" FOREIGN KEY ("project_id") REFERENCES "project"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "traversal" ADD CONSTRAINT "traversal_stack_id_fkey" FOREIGN KEY ("stack_id") REFERENCES "stack"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "traversal_graph" ADD CONSTRAINT "traversal_graph_traversal_id_fkey" FOREIGN KEY ("traversal_id") REFERENCES "traversal"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "resource" ADD CONSTRAINT "resource_stack_id_fkey" FOREIGN KEY ("stack_id") REFERENCES "stack"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "event" ADD CONSTRAINT "event_stack_id_fkey" FOREIGN KEY ("stack_id") REFERENCES "stack"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- lib/db/functions/00_indexes.sql
-- Indexes and constraints the Prisma schema language cannot express.

-- A live stack name is unique within its project; deleted stacks keep their name.
CREATE UNIQUE INDEX IF NOT EXISTS stack_project_live_name_key ON stack (project_id, name) WHERE deleted_at IS NULL;

-- The claim query scans only available jobs, oldest first.
CREATE INDEX IF NOT EXISTS job_available_idx ON job (id) WHERE locked_by IS NULL;

-- A failing traversal's jobs in flight (kiln_maybe_finish_failed, at every
-- settle while it fails): without it the check searched the traversal's
-- queue for one, per finish (15.7 job rows per finish for an 800-node
-- traversal, growing with its size; test/db/plans.test.ts).
CREATE INDEX IF NOT EXISTS job_claimed_idx ON job (traversal_id) WHERE locked_by IS NOT NULL;

-- The sweeper looks for locks whose lease ran out. A column an index names,
-- in its key or its predicate, rules out HOT updates: with this index every
-- lock, release and heartbeat writes a new entry into each of resource's
-- indexes. Measured (bench, layered-100 and chain/layered-1000): 12 % of
-- resource updates were HOT with it, 83 % without it, and the wall times did
-- not change beyond the noise, so it stays until the sweeper can find expired
-- leases another way (from the claimed jobs, say) without missing a lock.
CREATE INDEX IF NOT EXISTS resource_locked_lease_idx ON resource (lease_expires_at) WHERE engine_id IS NOT NULL;

-- Traversals still running (sweeper: deadlines, lost messages).
CREATE INDEX IF NOT EXISTS traversal_running_idx ON traversal (deadline) WHERE outcome IS NULL;

-- A cleanup node that deleted a replaced row clears `replaces` on its
-- replacement: without this, one sequential scan of the stack's rows per node.
CREATE INDEX IF NOT EXISTS resource_replaces_idx ON resource (replaces) WHERE replaces IS NOT NULL;

-- lib/db/functions/10_events.sql
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
BEGIN
  IF v_n = 0 THEN RETURN; END IF;
  -- 0x4b494c4e = 'KILN': the advisory lock class of event numbering.
  PERFORM pg_advisory_xact_lock(1263094862, hashtext(p_stack::text));
  SELECT coalesce(max(seq), 0) INTO v_last FROM event WHERE stack_id = p_stack;
  -- jsonb_populate_recordset maps the keys of kiln_ev to columns in one call
  -- (a JSON null becomes NULL), cheaper than extracting each field.
  INSERT INTO event (stack_id, seq, traversal_id, kind, resource_id, resource_name, physical_id, action, status, reason, data)
  SELECT p_stack, v_last + e.ordinality, e.traversal_id, e.kind, e.resource_id, e.resource_name, e.physical_id, e.action, e.status,
         coalesce(e.reason, ''), e.data
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

-- lib/db/functions/15_open_traversal.sql
-- kiln_open_traversal: the writes that start a traversal, in the transaction
-- where startTraversal (lib/db/queries/traversal.ts) locked the stack row
-- (FOR NO KEY UPDATE: no node step of the stack runs meanwhile), read its
-- rows and built the graph. They were six to nine statements, one round trip
-- each (~0.5 ms apiece on this machine after an idle moment), all on the path
-- from a submit to its first node; now they are one.
--
--   1. supersede the previous traversal (its outcome; its sync points go),
--   2. store the new one, and its graph in traversal_graph,
--   3. point the stack at it,
--   4. one sync point per node (a cleanup node's with its successors, for the
--      step that completes it when it has nothing to do), a job per leaf in
--      the given order (cleanup leaves first),
--   5. the events, and NOTIFY kiln_jobs naming the traversal (a woken worker
--      loads its template and graph while it claims), or, with no nodes at
--      all, the traversal completes at once;
--   6. with p_abort, NOTIFY kiln_abort (a delete stops in-flight actions).
--
-- enable_seqscan = off: PL/pgSQL keeps these plans per connection, and the
-- DELETEs by traversal must stay index scans however small sync_point was
-- when the plan was made (see 10_events.sql, "Plans").
CREATE OR REPLACE FUNCTION kiln_open_traversal(
  p_stack uuid, p_trav uuid, p_superseded uuid, p_action text,
  p_template uuid, p_stack_template uuid, p_started_by text, p_timeout_mins double precision, p_disable_rollback boolean,
  p_graph jsonb, p_roots int,
  p_rids int[], p_upds boolean[], p_required int[], p_successors jsonb[],
  p_leaf_rids int[], p_leaf_upds boolean[],
  p_abort jsonb
) RETURNS void LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  v_nodes int := coalesce(array_length(p_rids, 1), 0);
  v_reason text := 'Stack ' || p_action || ' started';
  v_events jsonb[] := '{}';
BEGIN
  IF p_superseded IS NOT NULL THEN
    UPDATE traversal SET outcome = 'SUPERSEDED', outcome_reason = 'superseded by a newer operation', superseded_by_id = p_trav, ended_at = now()
     WHERE id = p_superseded AND outcome IS NULL;
    IF FOUND THEN
      v_events := v_events || kiln_ev('traversal', p_superseded, NULL, NULL, NULL, NULL, 'SUPERSEDED',
        'superseded by ' || p_action || ' ' || p_trav, jsonb_build_object('superseded_by', p_trav));
    END IF;
    DELETE FROM sync_input WHERE traversal_id = p_superseded;
    DELETE FROM sync_point WHERE traversal_id = p_superseded;
  END IF;

  INSERT INTO traversal (id, stack_id, action, raw_template_id, started_by, deadline, node_count, roots_pending)
  VALUES (p_trav, p_stack, p_action, p_template, p_started_by, now() + p_timeout_mins * interval '1 minute', v_nodes, p_roots);
  -- Its own table: node steps read the traversal row at every step (schema.prisma, TraversalGraph).
  INSERT INTO traversal_graph (traversal_id, graph) VALUES (p_trav, p_graph);

  UPDATE stack SET current_traversal_id = p_trav, action = p_action, status = 'IN_PROGRESS', status_reason = v_reason,
         raw_template_id = p_stack_template,
         prev_raw_template_id = CASE WHEN p_action = 'CREATE' THEN NULL ELSE raw_template_id END,
         updated_at = CASE WHEN p_action = 'CREATE' THEN updated_at ELSE now() END,
         timeout_mins = p_timeout_mins, disable_rollback = coalesce(p_disable_rollback, disable_rollback)
   WHERE id = p_stack;

  IF v_nodes > 0 THEN
    INSERT INTO sync_point (traversal_id, resource_id, is_update, stack_id, required, state, successors)
    SELECT p_trav, r, u, p_stack, q, CASE WHEN q = 0 THEN 'READY' ELSE 'WAITING' END, s
      FROM unnest(p_rids, p_upds, p_required, p_successors) AS x(r, u, q, s);
    INSERT INTO job (kind, stack_id, traversal_id, resource_id, is_update)
    SELECT 'check_resource', p_stack, p_trav, r, u
      FROM unnest(p_leaf_rids, p_leaf_upds) WITH ORDINALITY AS x(r, u, ord) ORDER BY ord;
  END IF;

  v_events := v_events || kiln_ev('stack', p_trav, NULL, NULL, NULL, p_action, 'IN_PROGRESS', v_reason,
    jsonb_build_object('action', p_action, 'nodes', v_nodes, 'started_by', p_started_by));
  PERFORM kiln_emit(p_stack, to_jsonb(v_events));
  IF v_nodes = 0 THEN
    PERFORM kiln_complete_traversal(p_stack, p_trav);
  ELSE
    PERFORM pg_notify('kiln_jobs', p_trav::text);
  END IF;
  IF p_abort IS NOT NULL THEN
    PERFORM pg_notify('kiln_abort', p_abort::text);
  END IF;
END $$;

-- lib/db/functions/20_begin_node.sql
-- kiln_begin_node: a worker that claimed a check_resource job asks to work on
-- its node. One round trip, one transaction (lock order: 10_events.sql):
--
--   1. the job's traversal must still be the stack's current one   -> else 'stale'
--   2. the node must be READY (not already taken or done)           -> else 'duplicate'
--   3. the traversal must not have failed or timed out              -> else 'skipped'
--   4. the resource row must be unlocked:
--        lease of the holder ran out -> break its lock (row FAILED), go on
--        update node, row being deleted by an older traversal -> 'replace_deleting'
--        held by a live worker      -> register as the row's waiter, 'blocked'
--                                      (the holder retriggers us when it lets go)
--   5. lock it (engine_id, lease, atomic_key+1), node RUNNING        -> 'locked'
--
-- Terminal outcomes delete the job; 'locked' keeps it until kiln_finish_node.
--
-- kiln_begin_core does the work without emitting, so that a finish, a
-- replacement or a claim can begin a node in its own transaction and publish
-- everything once. With p_nowait it never waits for a lock (the caller
-- already holds later locks of the lock order): whatever would wait answers
-- 'later', changes nothing, and the job stays claimed for a plain begin.
-- It returns { result, events, settle } where settle names a traversal that
-- may have ended (kiln_settle, run by the caller after commit).

CREATE OR REPLACE FUNCTION kiln_predicted_action(p_row resource, p_is_update boolean, p_template uuid, p_stack_action text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN p_stack_action = 'CHECK' THEN 'CHECK'
    -- creating: a new row, or one whose create never completed (retried in place: idempotent physical names)
    WHEN p_is_update THEN CASE WHEN p_row.action = 'INIT' OR (p_row.action = 'CREATE' AND p_row.status = 'FAILED' AND p_row.properties IS NULL) THEN 'CREATE' END
    WHEN p_row.current_template_id IS DISTINCT FROM p_template AND NOT (p_row.action = 'DELETE' AND p_row.status = 'COMPLETE') THEN 'DELETE'
  END
$$;

-- The status a row is left in when the lock of a worker that died is broken.
-- It can no longer be trusted (the action may have half happened): FAILED. A
-- row already deleted stays deleted: its holder (a cleanup with nothing left
-- to do, an update node that replaces it) cannot have changed anything, and a
-- DELETE_FAILED row would be a live resource again that no node of the
-- current traversal, planned while the row was gone, would clean up.
CREATE OR REPLACE FUNCTION kiln_status_after_dead_holder(p_row resource) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_row.action = 'DELETE' AND p_row.status = 'COMPLETE' THEN 'COMPLETE' ELSE 'FAILED' END
$$;

-- Break the lock of a worker that stopped heartbeating (p_row: the row as it
-- was, locked FOR UPDATE by the caller); returns the event. The sweeper also
-- clears the waiter, which it retriggers itself; a begin that breaks the lock
-- leaves it, for its own finish to retrigger.
CREATE OR REPLACE FUNCTION kiln_break_dead_lock(p_row resource, p_clear_waiter boolean) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_status text := kiln_status_after_dead_holder(p_row);
BEGIN
  UPDATE resource SET engine_id = NULL, lock_traversal_id = NULL, lease_expires_at = NULL,
         waiter_traversal_id = CASE WHEN p_clear_waiter THEN NULL ELSE waiter_traversal_id END,
         waiter_is_update = CASE WHEN p_clear_waiter THEN NULL ELSE waiter_is_update END,
         status = v_status,
         status_reason = CASE WHEN v_status = 'FAILED' THEN 'Worker went down during resource ' || p_row.action ELSE status_reason END,
         atomic_key = atomic_key + 1, updated_at = now()
   WHERE id = p_row.id;
  RETURN kiln_ev('lock', p_row.lock_traversal_id, p_row.id, p_row.name, p_row.physical_id, p_row.action, v_status,
                 'Worker went down during resource ' || p_row.action, jsonb_build_object('lock', 'broken', 'worker', p_row.engine_id));
END $$;

-- PL/pgSQL rather than SQL for the helpers of a node step: PostgreSQL runs a
-- SQL function it cannot inline (an aggregate, a subquery) through a fresh
-- executor on every call, measured at ~60 µs more than the same body here.
CREATE OR REPLACE FUNCTION kiln_node_inputs(p_traversal uuid, p_rid int, p_is_update boolean) RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (SELECT coalesce(jsonb_agg(payload ORDER BY sender_id, sender_is_update) FILTER (WHERE payload IS NOT NULL), '[]'::jsonb)
            FROM sync_input WHERE traversal_id = p_traversal AND resource_id = p_rid AND is_update = p_is_update);
END $$;

-- Lock sync points of one traversal in the one global order (resource,
-- is_update): the keys are p_rids[i], p_upds[i]; null resource ids are ignored.
-- One primary-key probe per key: a single `IN (…) ORDER BY … FOR UPDATE` is
-- planned as a hash join over the whole table, one scan per finish (O(N²) for
-- a 10,000-node traversal). The LATERAL probe runs once per key, in the keys'
-- order (the sorted subquery is the outer side of the nested loop it forces).
-- Every node step locks only sync points of the stack's current traversal.
CREATE OR REPLACE FUNCTION kiln_lock_sync_points(p_trav uuid, p_rids int[], p_upds boolean[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1
     FROM (SELECT DISTINCT k.rid, k.upd FROM unnest(p_rids, p_upds) AS k(rid, upd) WHERE k.rid IS NOT NULL ORDER BY 1, 2) k
    CROSS JOIN LATERAL (SELECT 1 FROM sync_point sp
                         WHERE sp.traversal_id = p_trav AND sp.resource_id = k.rid AND sp.is_update = k.upd
                           FOR UPDATE) x;
END $$;

-- A batch of node steps (kiln_finish_nodes, kiln_replace_nodes) finds its
-- jobs, stacks and rows by key, one probe per key: a LATERAL subquery with a
-- lock or OFFSET 0 is never flattened into a join. Written as joins
-- (`id IN (SELECT … WHERE id = ANY(…))`), the cached generic plans made from
-- statistics an ANALYZE took mid-traversal walked the whole resource primary
-- key per batch (a merge join: every row of every stack), hashed every claimed
-- job of the database and scanned every locked row (test/db/plans.test.ts).

-- The jobs p_ids names that p_worker holds, in the order of p_ids. The holder
-- is checked outside the probe: inside it, a plan once searched the worker's
-- jobs (the locked_by index) for each id, the whole batch per job.
CREATE OR REPLACE FUNCTION kiln_batch_jobs(p_ids bigint[], p_worker uuid) RETURNS job[] LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN ARRAY(SELECT z.j FROM unnest(p_ids) WITH ORDINALITY AS k(id, n)
                CROSS JOIN LATERAL (SELECT j FROM job j WHERE j.id = k.id OFFSET 0) z
               WHERE (z.j).locked_by = p_worker
               ORDER BY k.n);
END $$;

-- A batch's first locks, in the lock order (10_events.sql): its jobs' stack
-- rows shared (1), then their resource rows and p_more_rows (2), each set in
-- id order.
CREATE OR REPLACE FUNCTION kiln_lock_batch(p_jobs job[], p_more_rows int[] DEFAULT '{}') RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1
     FROM (SELECT DISTINCT x.stack_id FROM unnest(p_jobs) x ORDER BY 1) k
    CROSS JOIN LATERAL (SELECT 1 FROM stack s WHERE s.id = k.stack_id FOR SHARE) z;
  PERFORM 1
     FROM (SELECT DISTINCT u.id FROM (SELECT x.resource_id FROM unnest(p_jobs) x UNION ALL SELECT unnest(p_more_rows)) AS u(id)
            WHERE u.id IS NOT NULL ORDER BY 1) k
    CROSS JOIN LATERAL (SELECT 1 FROM resource r WHERE r.id = k.id FOR UPDATE) z;
END $$;

-- What a locked node needs to run (row, inputs, scope).
CREATE OR REPLACE FUNCTION kiln_locked_reply(p_outcome text, p_row jsonb, p_s stack, p_t traversal, p_key int, p_upd boolean) RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN jsonb_build_object('outcome', p_outcome, 'resource', p_row,
    'inputs', kiln_node_inputs(p_t.id, p_key, p_upd),
    'replaces_uuid', (SELECT x.uuid FROM resource x WHERE x.id = (p_row->>'replaces')::int),
    'stack', jsonb_build_object('id', p_s.id, 'name', p_s.name, 'action', p_s.action),
    'traversal', jsonb_build_object('id', p_t.id, 'action', p_t.action, 'raw_template_id', p_t.raw_template_id, 'deadline', p_t.deadline));
END $$;

-- The last step of a begin, shared by kiln_begin_core and the finish that
-- begins a successor it made ready: lock the (unlocked) row for the worker
-- (engine_id, lease, atomic_key+1; `<action>_IN_PROGRESS` when the action is
-- known now), node RUNNING, its event, and what the worker needs to run it.
-- The caller holds the row and the sync point. Returns { result, events }.
CREATE OR REPLACE FUNCTION kiln_lock_node_row(p_r resource, p_s stack, p_t traversal, p_key int, p_upd boolean, p_sp sync_point, p_worker uuid, p_lease_ms int)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  r resource%ROWTYPE;
  v_action text := kiln_predicted_action(p_r, p_upd, p_t.raw_template_id, p_t.action);
  -- The engine decides from the state before this node touched the row.
  v_before jsonb := jsonb_build_object('action', p_r.action, 'status', p_r.status, 'status_reason', p_r.status_reason);
BEGIN
  UPDATE resource
     SET engine_id = p_worker, lock_traversal_id = p_t.id,
         lease_expires_at = now() + p_lease_ms * interval '1 millisecond',
         atomic_key = atomic_key + 1, last_traversal_id = p_t.id, updated_at = now(),
         action = coalesce(v_action, action),
         status = CASE WHEN v_action IS NULL THEN status ELSE 'IN_PROGRESS' END,
         status_reason = CASE WHEN v_action IS NULL THEN status_reason ELSE 'state changed' END
   WHERE id = p_r.id RETURNING * INTO r;
  UPDATE sync_point SET state = 'RUNNING', actor_id = r.id, updated_at = now()
   WHERE traversal_id = p_t.id AND resource_id = p_key AND is_update = p_upd;
  RETURN jsonb_build_object(
    'result', kiln_locked_reply('locked', to_jsonb(r) || v_before, p_s, p_t, p_key, p_upd),
    'events', jsonb_build_array(kiln_ev(CASE WHEN v_action IS NULL THEN 'node' ELSE 'resource' END, p_t.id, r.id, r.name, r.physical_id,
      CASE WHEN v_action IS NULL THEN NULL ELSE r.action END, CASE WHEN v_action IS NULL THEN NULL ELSE r.status END,
      CASE WHEN v_action IS NULL THEN 'running' ELSE 'state changed' END,
      jsonb_build_object('rid', p_key, 'update', p_upd, 'state', 'RUNNING', 'lock', 'acquired', 'worker', p_worker,
                         'lease_expires_at', r.lease_expires_at, 'satisfied', p_sp.satisfied, 'required', p_sp.required))));
END $$;

CREATE OR REPLACE FUNCTION kiln_begin_core(p_job bigint, p_worker uuid, p_lease_ms int, p_nowait boolean) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  j job%ROWTYPE;
  s stack%ROWTYPE;
  t traversal%ROWTYPE;
  sp sync_point%ROWTYPE;
  r resource%ROWTYPE;
  v_key int;
  v_lock jsonb;
  v_events jsonb := '[]';
  v_node jsonb;
  v_row_found boolean;
  v_later CONSTANT jsonb := '{"result": {"outcome": "later"}, "events": []}';
BEGIN
  SELECT * INTO j FROM job WHERE id = p_job;
  IF NOT FOUND OR j.locked_by IS DISTINCT FROM p_worker THEN
    RETURN jsonb_build_object('result', jsonb_build_object('outcome', 'gone'), 'events', '[]'::jsonb);
  END IF;
  -- Node steps share the stack row; a traversal start, a settle or a sweep
  -- (which take it exclusively) waits for them and they for it.
  IF p_nowait THEN
    SELECT * INTO s FROM stack WHERE id = j.stack_id FOR SHARE SKIP LOCKED;
    IF NOT FOUND AND EXISTS (SELECT 1 FROM stack WHERE id = j.stack_id) THEN RETURN v_later; END IF;
  ELSE
    SELECT * INTO s FROM stack WHERE id = j.stack_id FOR SHARE;
  END IF;
  IF s.id IS NULL OR s.current_traversal_id IS DISTINCT FROM j.traversal_id THEN
    DELETE FROM job WHERE id = p_job;
    RETURN jsonb_build_object('result', jsonb_build_object('outcome', 'stale', 'current_traversal_id', s.current_traversal_id), 'events', '[]'::jsonb);
  END IF;

  SELECT * INTO t FROM traversal WHERE id = j.traversal_id;
  v_key := coalesce(j.graph_key_id, j.resource_id);
  v_node := jsonb_build_object('rid', v_key, 'update', j.is_update);

  -- The row, then the node's sync point (lock order 2, 3): two jobs for one
  -- node (a requeue racing the original) queue here, and the second sees RUNNING.
  IF p_nowait THEN
    SELECT * INTO r FROM resource WHERE id = j.resource_id FOR UPDATE SKIP LOCKED;
    v_row_found := FOUND;
    IF NOT v_row_found AND EXISTS (SELECT 1 FROM resource WHERE id = j.resource_id) THEN RETURN v_later; END IF;
    SELECT * INTO sp FROM sync_point WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update FOR UPDATE SKIP LOCKED;
    IF NOT FOUND AND EXISTS (SELECT 1 FROM sync_point WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update) THEN
      RETURN v_later;
    END IF;
  ELSE
    SELECT * INTO r FROM resource WHERE id = j.resource_id FOR UPDATE;
    v_row_found := FOUND;
    SELECT * INTO sp FROM sync_point WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update FOR UPDATE;
  END IF;

  IF sp.state = 'RUNNING' AND sp.actor_id = j.resource_id AND r.engine_id = p_worker AND r.lock_traversal_id = j.traversal_id THEN
    -- A retry of a call that committed but whose reply was lost, or a step lost
    -- in a database crash (a lazy commit) whose job the worker gave back: answer
    -- as before. The row's state before that begin is not kept; a create it
    -- started is still a create (retried in place: physical names are stable per
    -- row), not an update of a row that was never made.
    RETURN jsonb_build_object('result', kiln_locked_reply('locked',
      to_jsonb(r) || CASE WHEN r.action = 'CREATE' AND r.status = 'IN_PROGRESS' AND r.properties IS NULL
                          THEN '{"action": "INIT", "status": "COMPLETE"}'::jsonb ELSE '{}' END,
      s, t, v_key, j.is_update), 'events', '[]'::jsonb);
  END IF;
  IF sp.state IS DISTINCT FROM 'READY' OR (sp.actor_id IS NOT NULL AND sp.actor_id <> j.resource_id) THEN
    DELETE FROM job WHERE id = p_job;
    RETURN jsonb_build_object('result', jsonb_build_object('outcome', 'duplicate', 'state', sp.state), 'events', '[]'::jsonb);
  END IF;

  IF t.failure_reason IS NULL AND t.deadline < now() THEN
    -- The traversal row comes after the sync points in the lock order; a
    -- begin that must not wait leaves the time-out to a plain begin.
    IF p_nowait THEN RETURN v_later; END IF;
    UPDATE traversal SET failure_reason = 'Timed out' WHERE id = t.id AND failure_reason IS NULL;
    IF FOUND THEN
      v_events := v_events || kiln_ev('stack', t.id, NULL, NULL, NULL, t.action, 'IN_PROGRESS', 'Timed out', jsonb_build_object('failing', true));
    END IF;
    SELECT * INTO t FROM traversal WHERE id = t.id;
  END IF;

  IF t.failure_reason IS NOT NULL OR NOT v_row_found THEN
    -- Failure policy: once a node failed, nothing new is started.
    IF NOT v_row_found AND t.failure_reason IS NULL THEN
      IF p_nowait THEN RETURN v_later; END IF;
      UPDATE traversal SET failure_reason = 'resource row ' || j.resource_id || ' vanished' WHERE id = t.id AND failure_reason IS NULL;
    END IF;
    UPDATE sync_point SET state = 'SKIPPED', updated_at = now()
     WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update;
    DELETE FROM job WHERE id = p_job;
    v_events := v_events || kiln_ev('node', t.id, j.resource_id, r.name, NULL, NULL, NULL, 'skipped: the traversal is failing',
                                    v_node || jsonb_build_object('state', 'SKIPPED'));
    RETURN jsonb_build_object('result', jsonb_build_object('outcome', 'skipped'), 'events', v_events, 'settle', t.id);
  END IF;

  IF r.engine_id IS NOT NULL AND r.lease_expires_at < now() THEN
    -- The holder stopped heartbeating: break its lock. The row can no longer be
    -- trusted (the action may have half happened), so it is FAILED (unless it
    -- was already deleted: kiln_status_after_dead_holder); an update node
    -- replaces it, a cleanup node deletes it. Its waiter stays, for this
    -- node's finish to retrigger.
    v_events := v_events || kiln_break_dead_lock(r, false);
    SELECT * INTO r FROM resource WHERE id = r.id;
  END IF;

  IF r.engine_id IS NOT NULL THEN
    IF j.is_update AND r.action = 'DELETE' AND r.status = 'IN_PROGRESS' THEN
      -- Do not wait for a delete this traversal would undo: create a replacement now.
      UPDATE sync_point SET state = 'RUNNING', actor_id = r.id, updated_at = now()
       WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update;
      RETURN jsonb_build_object('result', kiln_locked_reply('replace_deleting', to_jsonb(r), s, t, v_key, j.is_update), 'events', v_events);
    END IF;
    -- Held by a live worker of an older traversal: stop here. The holder
    -- retriggers this node when it lets go (kiln_retrigger_waiter). A newer
    -- traversal's node overwrites an older waiter: only the newest matters.
    UPDATE resource SET waiter_traversal_id = j.traversal_id, waiter_is_update = j.is_update WHERE id = r.id;
    UPDATE sync_point SET state = 'BLOCKED', updated_at = now()
     WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update;
    DELETE FROM job WHERE id = p_job;
    v_events := v_events || kiln_ev('node', t.id, r.id, r.name, r.physical_id, NULL, NULL,
      'blocked: locked by an older traversal',
      v_node || jsonb_build_object('state', 'BLOCKED', 'blocked_by', r.lock_traversal_id, 'holder', r.engine_id, 'lease_expires_at', r.lease_expires_at));
    RETURN jsonb_build_object('result', jsonb_build_object('outcome', 'blocked', 'blocked_by', r.lock_traversal_id), 'events', v_events);
  END IF;

  v_lock := kiln_lock_node_row(r, s, t, v_key, j.is_update, sp, p_worker, p_lease_ms);
  RETURN jsonb_build_object('result', v_lock->'result', 'events', v_events || (v_lock->'events'));
END $$;

CREATE OR REPLACE FUNCTION kiln_begin_node(p_job bigint, p_worker uuid, p_lease_ms int) RETURNS jsonb LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_stack uuid := (SELECT stack_id FROM job WHERE id = p_job);
  v jsonb := kiln_begin_core(p_job, p_worker, p_lease_ms, false);
BEGIN
  PERFORM kiln_emit(v_stack, v->'events');
  RETURN (v->'result') || jsonb_build_object('settle', v->'settle');
END $$;

-- May a step that began a node with this result commit lazily (10_events.sql)?
-- Only if the node was not locked to act, or its row is of a lazy type; a
-- replacement of a row being deleted never (the new row's type is not known here).
CREATE OR REPLACE FUNCTION kiln_begun_lazily(p_result jsonb, p_lazy_types jsonb) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE p_result->>'outcome'
    WHEN 'locked' THEN coalesce(p_lazy_types ? (p_result->'resource'->>'type'), false)
    WHEN 'replace_deleting' THEN false
    ELSE true END
$$;

-- kiln_claim: claim up to p_limit available jobs, oldest first, skipping rows
-- another claimer holds (graphile-worker's pattern). The pick is a CTE,
-- evaluated once: written as `WHERE id IN (SELECT … LIMIT n FOR UPDATE SKIP
-- LOCKED)` the planner may re-run the subquery and claim more than n (the
-- likely way the lock-step harness, which asks for one job, lost jobs in some
-- full-suite runs). Compared with the wall clock, not the transaction's start:
-- run_at is stored to the millisecond (rounded), so a job just made ready could
-- otherwise look a fraction of a millisecond in the future to an immediate claim.
-- The picked jobs are then updated by key (`id = ANY(…)`): joined to the CTE,
-- a plan made after an ANALYZE walked the job primary key from its start to
-- the picked ids, every older job once per claim (test/db/plans.test.ts).
CREATE OR REPLACE FUNCTION kiln_claim(p_worker uuid, p_limit int) RETURNS SETOF job LANGUAGE sql AS $$
  WITH picked AS (SELECT id FROM job WHERE locked_by IS NULL AND run_at <= clock_timestamp() ORDER BY id LIMIT p_limit FOR UPDATE SKIP LOCKED)
  UPDATE job SET locked_by = p_worker, locked_at = now(), attempts = attempts + 1
   WHERE job.id = ANY(ARRAY(SELECT id FROM picked))
  RETURNING job.*
$$;

-- kiln_claim_jobs: claim up to p_limit available jobs (kiln_claim) and begin
-- each check_resource job in the same transaction, so a queued node costs one
-- round trip before its action, not two. A begin that would have to wait for a lock answers 'later' and its
-- job is returned claimed but not begun. Events are published per stack, in
-- stack order, at the end (lock order 5).
-- Returns { jobs: [{ job, begun }], settle: [{ stack_id, traversal_id }] }.
-- Commits lazily when every node it locked is of a type in p_lazy_types and
-- it claimed nothing but node jobs (10_events.sql).
--
-- A fair share, not all it has room for: one NOTIFY wakes every worker, and
-- the first to claim used to take a whole burst (ten roots, say) while the
-- others found nothing; its inline continuations then kept the traversal on
-- that one process, the others idle. It takes ceil(available / claimers),
-- where the claimers are itself and every other live worker (state running,
-- heartbeat within a lease) that has not claimed in the last 20 ms: a worker
-- claiming at the same moment cannot see this claim and takes its own share;
-- one that already took its share does not count, so the last claimer of a
-- burst takes the rest. Each claim of a non-empty queue stamps its worker's
-- row (last_claim_at; the worker row comes before every other lock, as in
-- the heartbeat). The check once looked for each worker's recent claims among
-- the jobs, and after an ANALYZE that saw one worker's claims its cached plan
-- read every claimed job per worker: 21.5 job rows per claimed job instead of
-- 11 with four workers and 64 in flight (test/db/plans.test.ts). Whatever it
-- leaves it announces with a NOTIFY, so no job waits for a timer: each round
-- claims at least one job, so the rounds end.
-- Measured (layered-100, D = 0.2 s, two workers): the first layer's finishes
-- returned in 13 ms instead of 26 ms.
--
-- No bitmap scans: a bitmap index scan reads the whole index before any
-- LIMIT applies, so the count of ready jobs read the entire queue on every
-- claim (a cached plan chose it: ~1,600 index entries per claim of 8 from a
-- 1,600-job queue, test/db/plans.test.ts). A plain index scan stops at the limit.
CREATE OR REPLACE FUNCTION kiln_claim_jobs(p_worker uuid, p_limit int, p_lease_ms int, p_lazy_types jsonb DEFAULT NULL) RETURNS jsonb LANGUAGE plpgsql SET enable_seqscan = off SET enable_bitmapscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_lazy boolean := p_lazy_types IS NOT NULL;
  v_job job%ROWTYPE;
  -- jsonb[] accumulators (see kiln_finish_node), turned into jsonb at the end
  v_out jsonb[] := '{}';
  v jsonb;
  v_ev_stacks uuid[] := '{}';
  v_ev_lists jsonb[] := '{}';
  v_settle jsonb := '[]';
  v_avail int;
  v_others int := 0;
  v_take int := p_limit;
BEGIN
  -- Counted up to what any share could need (8 claimers' worth).
  SELECT count(*) INTO v_avail FROM (
    SELECT 1 FROM job WHERE locked_by IS NULL AND run_at <= clock_timestamp() LIMIT p_limit * 8) a;
  IF v_avail > 0 THEN
    UPDATE worker SET last_claim_at = clock_timestamp() WHERE id = p_worker;
  END IF;
  IF v_avail > 1 THEN
    SELECT count(*) INTO v_others FROM worker w
     WHERE w.id <> p_worker AND w.state = 'running' AND w.stopped_at IS NULL
       AND w.heartbeat_at > now() - p_lease_ms * interval '1 millisecond'
       AND (w.last_claim_at IS NULL OR w.last_claim_at <= clock_timestamp() - interval '20 milliseconds');
    v_take := least(p_limit, ceil(v_avail::numeric / (1 + v_others))::int);
    IF v_others > 0 AND v_avail > v_take THEN PERFORM pg_notify('kiln_jobs', ''); END IF;
  END IF;
  FOR v_job IN
    SELECT * FROM kiln_claim(p_worker, v_take) ORDER BY stack_id, id
  LOOP
    v := NULL;
    IF v_job.kind <> 'check_resource' THEN
      v_lazy := false;
    ELSE
      v := kiln_begin_core(v_job.id, p_worker, p_lease_ms, true);
      v_lazy := v_lazy AND kiln_begun_lazily(v->'result', p_lazy_types);
      IF jsonb_array_length(v->'events') > 0 THEN
        v_ev_stacks := v_ev_stacks || v_job.stack_id;
        v_ev_lists := v_ev_lists || (v->'events');
      END IF;
      IF v->>'settle' IS NOT NULL THEN
        v_settle := v_settle || jsonb_build_array(jsonb_build_object('stack_id', v_job.stack_id, 'traversal_id', v->'settle'));
      END IF;
    END IF;
    v_out := v_out || jsonb_build_object('job', to_jsonb(v_job), 'begun', v->'result');
  END LOOP;
  IF v_lazy AND cardinality(v_out) > 0 THEN PERFORM kiln_commit_lazily(); END IF;
  PERFORM kiln_emit_each(kiln_events_by_stack(v_ev_stacks, v_ev_lists));
  RETURN jsonb_build_object('jobs', to_jsonb(v_out), 'settle', v_settle);
END $$;

-- lib/db/functions/30_finish_node.sql
-- kiln_finish_node: a worker is done with a node. One round trip, one
-- transaction (lock order: 10_events.sql):
--
--   1. release the row's lock, writing its new state (guarded: the lock must
--      still be ours — a lock broken after our lease ran out is not ours);
--   2. retrigger the newer traversal's node that found the row locked, if any
--      (every exit path of a lock holder — success, failure, timeout, abort,
--      replacement — comes through here or kiln_replace_node);
--   3. if the traversal is still current:
--        failure -> the traversal is failing (kiln_settle then fails the
--                   stack once nothing is in flight);
--        success -> report to each successor's sync point (one sync_input row
--                   per edge: O(edges) in total); the report that completes a
--                   node's set makes it READY and inserts its job (up to
--                   claim_max of them claimed by this worker when
--                   p_result.claim, and begun too when that needs no waiting,
--                   so the worker continues with them without a queue hop or
--                   another round trip); a root counts down the traversal.
--
-- Node steps of one stack run side by side (they share the stack row), so
-- anything that changes the stack row itself — COMPLETE, FAILED, a rollback —
-- is left to kiln_settle, which the caller runs after commit when the reply
-- names a traversal in `settle` (and the sweeper runs if the caller died).
--
-- p_result: { ok, reason, set: {column: value, …}, resource_event, payload,
--             successors: [[rid, is_update], …], is_root, claim, claim_max, deleted,
--             begin_lease_ms, in_progress_event, lazy_types }
-- Returns { outcome, claimed: [{ job, begun }], queued, settle }; the
-- transaction commits lazily (kiln_commit_lazily) when every row it releases or
-- locks is of a type in lazy_types.

CREATE OR REPLACE FUNCTION kiln_retrigger_waiter(p_stack stack, p_rid int, p_trav uuid, p_upd boolean) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_name text;
BEGIN
  IF p_trav IS NULL OR p_stack.current_traversal_id IS DISTINCT FROM p_trav THEN RETURN NULL; END IF;
  UPDATE sync_point SET state = 'READY', actor_id = NULL, updated_at = now()
   WHERE traversal_id = p_trav AND resource_id = p_rid AND is_update = p_upd AND state = 'BLOCKED';
  IF NOT FOUND THEN RETURN NULL; END IF;
  INSERT INTO job (kind, stack_id, traversal_id, resource_id, is_update) VALUES ('check_resource', p_stack.id, p_trav, p_rid, p_upd);
  SELECT name INTO v_name FROM resource WHERE id = p_rid;
  RETURN kiln_ev('node', p_trav, p_rid, v_name, NULL, NULL, NULL, 'retriggered: the older traversal released the lock',
                 jsonb_build_object('rid', p_rid, 'update', p_upd, 'state', 'READY', 'retriggered', true));
END $$;

-- A stack left IN_PROGRESS: NOTIFY kiln_stack '{stack_id, traversal_id, action, status}',
-- for whoever waits for an operation to end (the bench; scripts) without
-- reading every event.
CREATE OR REPLACE FUNCTION kiln_notify_settled(p_stack uuid, p_trav uuid, p_action text, p_status text) RETURNS void LANGUAGE sql AS $$
  SELECT pg_notify('kiln_stack', json_build_object('stack_id', p_stack, 'traversal_id', p_trav, 'action', p_action, 'status', p_status)::text)
$$;

-- When a failing traversal has nothing left in flight: stack FAILED, the rest
-- of its queue dropped, and (if the stack rolls back on failure) a rollback job.
CREATE OR REPLACE FUNCTION kiln_maybe_finish_failed(p_stack uuid, p_trav uuid) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  t traversal%ROWTYPE;
  s stack%ROWTYPE;
  v_reason text;
BEGIN
  SELECT * INTO t FROM traversal WHERE id = p_trav;
  IF t.outcome IS NOT NULL OR t.failure_reason IS NULL THEN RETURN false; END IF;
  IF EXISTS (SELECT 1 FROM job WHERE traversal_id = p_trav AND kind = 'check_resource' AND locked_by IS NOT NULL) THEN
    RETURN false;
  END IF;
  v_reason := t.failure_reason;
  UPDATE stack SET status = 'FAILED', status_reason = v_reason
   WHERE id = p_stack AND current_traversal_id = p_trav AND status = 'IN_PROGRESS' RETURNING * INTO s;
  IF NOT FOUND THEN RETURN false; END IF;
  UPDATE traversal SET outcome = 'FAILED', outcome_reason = v_reason, ended_at = now() WHERE id = p_trav;
  DELETE FROM job WHERE traversal_id = p_trav AND kind = 'check_resource';
  UPDATE sync_point SET state = 'SKIPPED', updated_at = now() WHERE traversal_id = p_trav AND state IN ('WAITING', 'READY', 'BLOCKED');
  PERFORM kiln_emit(p_stack, jsonb_build_array(kiln_ev('stack', p_trav, NULL, NULL, NULL, s.action, 'FAILED', v_reason, NULL)));
  PERFORM kiln_notify_settled(p_stack, p_trav, s.action, 'FAILED');
  IF NOT s.disable_rollback AND t.action IN ('CREATE', 'UPDATE') THEN
    INSERT INTO job (kind, stack_id, traversal_id) VALUES ('rollback', p_stack, p_trav);
    PERFORM pg_notify('kiln_jobs', '');
  END IF;
  RETURN true;
END $$;

-- The last root reported: the stack is COMPLETE. Rows deleted by this (or an
-- earlier) traversal are purged; a DELETE traversal soft-deletes the stack.
CREATE OR REPLACE FUNCTION kiln_complete_traversal(p_stack uuid, p_trav uuid) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  t traversal%ROWTYPE;
  s stack%ROWTYPE;
  v_reason text;
BEGIN
  SELECT * INTO t FROM traversal WHERE id = p_trav;
  v_reason := 'Stack ' || t.action || ' completed successfully';
  UPDATE stack SET status = 'COMPLETE', status_reason = v_reason,
         last_good_template_id = CASE WHEN t.action IN ('DELETE', 'CHECK') THEN last_good_template_id ELSE t.raw_template_id END,
         deleted_at = CASE WHEN t.action = 'DELETE' THEN now() ELSE deleted_at END
   WHERE id = p_stack AND current_traversal_id = p_trav AND status = 'IN_PROGRESS' RETURNING * INTO s;
  IF NOT FOUND THEN RETURN; END IF;
  UPDATE traversal SET outcome = 'COMPLETE', outcome_reason = v_reason, ended_at = now() WHERE id = p_trav;
  PERFORM kiln_emit(p_stack, jsonb_build_array(kiln_ev('stack', p_trav, NULL, NULL, NULL, s.action, 'COMPLETE', v_reason, NULL)));
  PERFORM kiln_notify_settled(p_stack, p_trav, s.action, 'COMPLETE');
  DELETE FROM resource WHERE stack_id = p_stack AND action = 'DELETE' AND status = 'COMPLETE' AND engine_id IS NULL;
  DELETE FROM sync_input WHERE traversal_id = p_trav;
  DELETE FROM sync_point WHERE traversal_id = p_trav;
END $$;

-- With p_emit false (kiln_finish_nodes), the events and queued count are
-- returned (`stack_id`, `events`) for the caller to publish once per batch.
CREATE OR REPLACE FUNCTION kiln_finish_node(p_job bigint, p_worker uuid, p_result jsonb, p_emit boolean DEFAULT true) RETURNS jsonb LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  j job%ROWTYPE;
  s stack%ROWTYPE;
  t traversal%ROWTYPE;
  r resource%ROWTYPE;
  v_sp sync_point%ROWTYPE;
  v_new job%ROWTYPE;
  v_set jsonb := coalesce(p_result->'set', '{}');
  v_ok boolean := coalesce((p_result->>'ok')::boolean, false);
  v_srids int[];
  v_supds boolean[];
  v_current boolean;
  v_key int;
  -- Events gather in a jsonb[] (appending is amortised O(1) in PL/pgSQL), not
  -- a jsonb array: each `jsonb || element` re-encodes the whole array, O(n²) for
  -- a finish that completes a long tail of no-op cleanups inline (measured: 300
  -- events 96 ms as a jsonb array, 8 ms as a jsonb[]).
  v_events jsonb[] := '{}';
  v_ev jsonb;
  v_waiter_trav uuid;
  v_waiter_upd boolean;
  v_srid int;
  v_supd boolean;
  -- How many of the successors this finish makes ready the worker takes on
  -- (its free job slots); the rest are queued for any worker.
  v_claim_left int := CASE WHEN (p_result->>'claim')::boolean THEN coalesce((p_result->>'claim_max')::int, 1) ELSE 0 END;
  v_claimed jsonb := '[]';
  v_begun_events jsonb[] := '{}';
  v_free boolean;
  v_mine boolean;
  v_lock jsonb;
  v_parked jsonb;
  v_parked_ev jsonb;
  v_park boolean := false;
  v_begin_ms int := (p_result->>'begin_lease_ms')::int;
  v_row resource%ROWTYPE;
  v_queued int := 0;
  v_pending int;
  v_settle uuid;
  v_begin jsonb;
  v_lazy_types jsonb := p_result->'lazy_types';
  v_lazy boolean;
  v_root_of uuid;
  v_roots_done int := 0;
  v_direct int;
  v_i int;
  v_from int[];
  v_from_upd boolean[];
  v_from_name text[];
  v_got int;
  -- No-op cleanup nodes completed in one step at most (each adds to one
  -- transaction's events; the rest go to a worker, whose finish goes on).
  v_inline_left int := 64;
  -- A no-op cleanup node completed here (below): its successors not yet DONE,
  -- which it reports to; v_early: completed with its own row's update.
  v_open_rids int[];
  v_open_upds boolean[];
  v_early boolean;
BEGIN
  SELECT * INTO j FROM job WHERE id = p_job;
  IF NOT FOUND OR j.locked_by IS DISTINCT FROM p_worker THEN
    -- Already finished (a retry after a lost reply) or taken away by the sweeper.
    RETURN jsonb_build_object('outcome', 'gone');
  END IF;
  SELECT * INTO s FROM stack WHERE id = j.stack_id FOR SHARE;
  SELECT * INTO r FROM resource WHERE id = j.resource_id FOR UPDATE;
  IF NOT FOUND OR r.engine_id IS DISTINCT FROM p_worker THEN
    -- Our lease ran out and the lock was broken; whoever broke it re-runs the node.
    DELETE FROM job WHERE id = p_job;
    RETURN jsonb_build_object('outcome', 'lock_lost');
  END IF;
  v_waiter_trav := r.waiter_traversal_id;
  v_waiter_upd := r.waiter_is_update;
  v_lazy := v_lazy_types ? r.type;
  v_key := coalesce(j.graph_key_id, j.resource_id);
  v_current := s.current_traversal_id IS NOT DISTINCT FROM j.traversal_id;

  -- The keys of `set` are column names: jsonb_populate_record lays them over
  -- the row in one call (a JSON array becomes int[], a string a uuid).
  v_row := jsonb_populate_record(r, v_set);
  UPDATE resource SET
    action = v_row.action, status = v_row.status, status_reason = v_row.status_reason, type = v_row.type,
    physical_id = v_row.physical_id, properties = v_row.properties, attributes = v_row.attributes, data = v_row.data,
    -- a stored result replaces the intent written before the action (kiln_record_intent)
    pending_properties = CASE WHEN v_set ? 'properties' THEN NULL ELSE pending_properties END,
    requires = v_row.requires, current_template_id = v_row.current_template_id, deletion_policy = v_row.deletion_policy,
    replaced_by = CASE WHEN v_set->>'clear_replaced_by' = 'true' THEN NULL ELSE replaced_by END,
    engine_id = NULL, lock_traversal_id = NULL, lease_expires_at = NULL,
    waiter_traversal_id = NULL, waiter_is_update = NULL,
    atomic_key = atomic_key + 1, updated_at = now()
  WHERE id = r.id RETURNING * INTO r;
  v_lazy := v_lazy AND v_lazy_types ? r.type;
  DELETE FROM job WHERE id = p_job;

  IF coalesce((p_result->>'deleted')::boolean, false) THEN
    -- The replaced row is gone: its replacement no longer replaces anything (Heat's _update_replacement_data).
    UPDATE resource SET replaces = NULL
     WHERE replaces = r.id AND stack_id = s.id
       AND current_template_id = (SELECT raw_template_id FROM traversal WHERE id = j.traversal_id);
  END IF;

  -- Every sync point this transaction writes (all of the current traversal),
  -- locked at once in the global order — by kiln_finish_nodes for the whole
  -- batch when this finish is one of a batch (p_emit false: the same keys).
  IF v_current AND v_ok THEN
    SELECT coalesce(array_agg((e->>0)::int), '{}'), coalesce(array_agg((e->>1)::boolean), '{}') INTO v_srids, v_supds
      FROM jsonb_array_elements(p_result->'successors') e;
  END IF;
  IF p_emit THEN
    PERFORM kiln_lock_sync_points(s.current_traversal_id,
      CASE WHEN v_current THEN v_key END || coalesce(v_srids, '{}') || CASE WHEN v_waiter_trav = s.current_traversal_id THEN r.id END,
      j.is_update || coalesce(v_supds, '{}') || v_waiter_upd);
  END IF;

  IF p_result ? 'in_progress_event' THEN
    -- A quick action was not marked IN_PROGRESS while it ran (kiln_mark_in_progress): the history still shows it.
    v_events := v_events || kiln_in_progress_ev(j.traversal_id, r, p_result->>'in_progress_event', v_key, j.is_update);
  END IF;
  v_events := v_events || kiln_ev(CASE WHEN coalesce((p_result->>'resource_event')::boolean, false) THEN 'resource' ELSE 'node' END,
    j.traversal_id, r.id, r.name, r.physical_id,
    CASE WHEN coalesce((p_result->>'resource_event')::boolean, false) THEN r.action END,
    CASE WHEN coalesce((p_result->>'resource_event')::boolean, false) THEN r.status END,
    coalesce(p_result->>'reason', CASE WHEN v_ok THEN 'done' ELSE 'failed' END),
    jsonb_build_object('rid', v_key, 'update', j.is_update, 'actor', r.id, 'state', CASE WHEN v_ok THEN 'DONE' ELSE 'FAILED' END,
                       'lock', 'released', 'stale', NOT v_current) || coalesce(p_result->'event_data', '{}'));

  IF v_current THEN
    SELECT * INTO t FROM traversal WHERE id = j.traversal_id;
    IF NOT v_ok THEN
      UPDATE sync_point SET state = 'FAILED', updated_at = now()
       WHERE traversal_id = t.id AND resource_id = v_key AND is_update = j.is_update;
      UPDATE traversal SET failure_reason = coalesce(p_result->>'reason', 'resource failed') WHERE id = t.id AND failure_reason IS NULL;
      IF FOUND THEN
        v_events := v_events || kiln_ev('stack', t.id, NULL, NULL, NULL, t.action, 'IN_PROGRESS',
          'failing: ' || coalesce(p_result->>'reason', 'resource failed'), jsonb_build_object('failing', true));
      END IF;
      v_settle := t.id;
    ELSE
      UPDATE sync_point SET state = 'DONE', actor_id = r.id, updated_at = now()
       WHERE traversal_id = t.id AND resource_id = v_key AND is_update = j.is_update;
      IF t.failure_reason IS NOT NULL THEN
        v_settle := t.id;
      ELSE
        -- The reports to make: this node's to its successors, then those of
        -- no-op cleanup nodes completed below (sender arrays run alongside).
        v_direct := coalesce(array_length(v_srids, 1), 0);
        v_from := array_fill(v_key, ARRAY[v_direct]);
        v_from_upd := array_fill(j.is_update, ARRAY[v_direct]);
        v_from_name := array_fill(r.name, ARRAY[v_direct]);
        v_roots_done := CASE WHEN coalesce((p_result->>'is_root')::boolean, false) THEN 1 ELSE 0 END;
        v_i := 0;
        WHILE v_i < coalesce(array_length(v_srids, 1), 0) LOOP
          v_i := v_i + 1;
          v_srid := v_srids[v_i];
          v_supd := v_supds[v_i];
          -- A report's sync_input row makes it count once (a node run twice, Heat's
          -- duplicate triggers, reports twice). A no-op cleanup node completed
          -- below cannot report twice: it was completed under its sync point's lock,
          -- in the transaction that made it READY, and is DONE from then on. Its
          -- reports (always to cleanup nodes: no payload) write no row. With the
          -- skipped rewrite of last_traversal_id below, the tail an in-place
          -- update's last finish completes (55 no-op cleanups of layered-100,
          -- stepped alone) went from 12.1 to 9.0 ms.
          IF v_i <= v_direct THEN
            INSERT INTO sync_input (traversal_id, resource_id, is_update, sender_id, sender_is_update, payload)
            VALUES (t.id, v_srid, v_supd, v_from[v_i], v_from_upd[v_i], CASE WHEN v_supd THEN p_result->'payload' END)
            ON CONFLICT DO NOTHING;
            CONTINUE WHEN NOT FOUND;
          END IF;
          UPDATE sync_point SET satisfied = satisfied + 1,
                 state = CASE WHEN satisfied + 1 >= required AND state = 'WAITING' THEN 'READY' ELSE state END,
                 updated_at = now()
           WHERE traversal_id = t.id AND resource_id = v_srid AND is_update = v_supd
           RETURNING * INTO v_sp;
          CONTINUE WHEN NOT FOUND;
          -- Cleanup nodes with nothing to do are completed here, as the worker would
          -- (no lock, no action), in two cases:
          --  * inline: the node is READY (this report was its last input), its
          --    row is free and at the traversal's template (or already deleted:
          --    decideCleanup's no-op). An in-place update's cleanup tail then
          --    costs no round trip per node.
          --  * early: the node is this row's own cleanup, and this update has just
          --    left the row at the traversal's template (in place or unchanged),
          --    so the cleanup has nothing to do whenever it runs. Heat waits for
          --    the cleanup nodes of the rows that used this one; that order
          --    matters only for a row that is deleted, and this one is not. An
          --    old row it used is still deleted only after this update (this
          --    completion reports to it) and after every other row that used it
          --    directly (their own edges). The update then has no cleanup tail
          --    after its last update node.
          -- Successors already DONE (completed early) get no report; the others
          -- are taken without waiting, and if one is busy the node goes the usual
          -- way below. A node completed early still has inputs to come: each is an
          -- obligation added to the traversal's roots_pending now and paid when the
          -- input reports (a report into a DONE node, here or below), so the count
          -- reaches 0 only when every node has reported, as before.
          v_early := v_i <= v_direct AND NOT v_supd AND v_srid = v_key AND r.id = v_key AND j.is_update
                     AND v_sp.state IN ('WAITING', 'READY')
                     AND kiln_predicted_action(r, false, t.raw_template_id, t.action) IS NULL;
          IF NOT v_supd AND v_inline_left > 0 AND v_begin_ms IS NOT NULL AND t.deadline >= now() AND v_sp.successors IS NOT NULL
             AND (v_early OR (v_sp.state = 'READY' AND v_sp.satisfied = v_sp.required AND v_claim_left > 0)) THEN
            IF v_early THEN
              v_row := r; -- released above, still locked by this transaction
              v_free := true;
            ELSE
              SELECT * INTO v_row FROM resource WHERE id = v_srid FOR UPDATE SKIP LOCKED;
              -- No predicted action for a cleanup node is decideCleanup's no-op (a CHECK predicts CHECK).
              v_free := FOUND AND v_row.engine_id IS NULL AND kiln_predicted_action(v_row, false, t.raw_template_id, t.action) IS NULL;
            END IF;
            IF v_free THEN
              -- Each successor by key (a scalar subquery, a LATERAL with a lock): as
              -- a join, the generic plan reads every sync point of the traversal and
              -- hashes them, per node (O(N²) for the tail; test/db/plans.test.ts).
              SELECT coalesce(array_agg(k.rid) FILTER (WHERE NOT k.done), '{}'), coalesce(array_agg(k.upd) FILTER (WHERE NOT k.done), '{}')
                INTO v_open_rids, v_open_upds
                FROM (SELECT (x->>0)::int AS rid, (x->>1)::boolean AS upd,
                             coalesce((SELECT sp.state = 'DONE' FROM sync_point sp
                                        WHERE sp.traversal_id = t.id AND sp.resource_id = (x->>0)::int AND sp.is_update = (x->>1)::boolean), false) AS done
                        FROM jsonb_array_elements(v_sp.successors) x OFFSET 0) k; -- OFFSET 0: one lookup per successor, not one per use of `done`
              IF cardinality(v_open_rids) > 0 THEN
                SELECT count(*) = cardinality(v_open_rids) INTO v_free
                  FROM unnest(v_open_rids, v_open_upds) AS k(rid, upd)
                 CROSS JOIN LATERAL (SELECT 1 FROM sync_point sp
                                      WHERE sp.traversal_id = t.id AND sp.resource_id = k.rid AND sp.is_update = k.upd
                                        FOR UPDATE SKIP LOCKED) z;
              END IF;
            END IF;
            IF v_free THEN
              UPDATE sync_point SET state = 'DONE', actor_id = v_srid, updated_at = now()
               WHERE traversal_id = t.id AND resource_id = v_srid AND is_update = false;
              -- A row updated in place was marked when its update node began.
              IF v_row.last_traversal_id IS DISTINCT FROM t.id THEN
                UPDATE resource SET last_traversal_id = t.id WHERE id = v_srid;
              END IF;
              v_events := v_events || kiln_ev('node', t.id, v_srid, v_row.name, NULL, NULL, NULL,
                CASE WHEN v_row.current_template_id = t.raw_template_id THEN 'already at the traversal template' ELSE 'already deleted' END,
                jsonb_build_object('rid', v_srid, 'update', false, 'state', 'DONE', 'satisfied', v_sp.satisfied,
                                   'required', v_sp.required, 'from', v_from_name[v_i], 'inline', true)
                || CASE WHEN v_early THEN jsonb_build_object('early', true) ELSE '{}' END);
              v_inline_left := v_inline_left - 1;
              v_got := jsonb_array_length(v_sp.successors);
              -- roots_pending: a root done, a report to each DONE successor paid, the inputs still to come owed.
              v_roots_done := v_roots_done + CASE WHEN v_got = 0 THEN 1 ELSE 0 END
                              + (v_got - cardinality(v_open_rids)) - (v_sp.required - v_sp.satisfied);
              IF cardinality(v_open_rids) > 0 THEN
                v_srids := v_srids || v_open_rids;
                v_supds := v_supds || v_open_upds;
                v_from := v_from || array_fill(v_srid, ARRAY[cardinality(v_open_rids)]);
                v_from_upd := v_from_upd || array_fill(false, ARRAY[cardinality(v_open_rids)]);
                v_from_name := v_from_name || array_fill(v_row.name, ARRAY[cardinality(v_open_rids)]);
              END IF;
              CONTINUE;
            END IF;
          END IF;
          IF v_sp.state = 'DONE' THEN
            -- Completed early: this report was owed to roots_pending (above). A
            -- count beyond `required` would be a duplicate; none is written.
            IF v_sp.satisfied <= v_sp.required THEN v_roots_done := v_roots_done + 1; END IF;
            CONTINUE;
          END IF;
          IF v_sp.state = 'READY' AND v_sp.satisfied = v_sp.required THEN
            -- The worker continues with it (no queue hop) while it has room, and
            -- it is begun here when nothing stands in the way (the common case:
            -- a free row, time left): its row taken SKIP LOCKED (resource rows
            -- come before sync points in the lock order; we hold its sync point).
            v_free := false;
            IF v_claim_left > 0 AND v_begin_ms IS NOT NULL AND t.deadline >= now() THEN
              SELECT * INTO v_row FROM resource WHERE id = v_srid FOR UPDATE SKIP LOCKED;
              v_free := FOUND AND v_row.engine_id IS NULL;
            END IF;
            -- One claimed node whose row is busy is left to kiln_begin_core below.
            v_mine := v_free OR (v_claim_left > 0 AND v_parked IS NULL);
            INSERT INTO job (kind, stack_id, traversal_id, resource_id, is_update, locked_by, locked_at, attempts)
            VALUES ('check_resource', s.id, t.id, v_srid, v_supd,
                    CASE WHEN v_mine THEN p_worker END, CASE WHEN v_mine THEN now() END, CASE WHEN v_mine THEN 1 ELSE 0 END)
            RETURNING * INTO v_new;
            IF v_free THEN
              v_lock := kiln_lock_node_row(v_row, s, t, v_srid, v_supd, v_sp, p_worker, v_begin_ms);
              v_lazy := v_lazy AND v_lazy_types ? v_row.type;
              v_claimed := v_claimed || jsonb_build_array(jsonb_build_object('job', to_jsonb(v_new), 'begun', v_lock->'result'));
              v_begun_events := v_begun_events || (v_lock->'events'->0); -- kiln_lock_node_row writes one event
              v_claim_left := v_claim_left - 1;
              CONTINUE; -- its RUNNING event (inputs k of n) says all its "ready" would
            ELSIF v_mine THEN
              v_parked := to_jsonb(v_new);
              v_park := true;
              v_claim_left := v_claim_left - 1;
            ELSE
              v_queued := v_queued + 1;
            END IF;
          END IF;
          v_ev := kiln_ev('node', t.id, v_srid, NULL, NULL, NULL, NULL,
            CASE WHEN v_sp.state = 'READY' THEN 'ready' ELSE 'input reported' END,
            jsonb_build_object('rid', v_srid, 'update', v_supd, 'state', v_sp.state, 'satisfied', v_sp.satisfied,
                               'required', v_sp.required, 'from', v_from_name[v_i]));
          IF v_park THEN v_parked_ev := v_ev; v_park := false; ELSE v_events := v_events || v_ev; END IF;
        END LOOP;
        -- Negative when nodes completed early owe more reports than were paid.
        IF v_roots_done <> 0 THEN
          IF p_emit THEN
            UPDATE traversal SET roots_pending = roots_pending - v_roots_done WHERE id = t.id RETURNING roots_pending INTO v_pending;
            IF v_pending = 0 THEN v_settle := t.id; END IF;
          ELSE
            v_root_of := t.id; -- counted down by the batch, once, at its end
          END IF;
        END IF;
      END IF;
    END IF;
  END IF;

  IF v_waiter_trav IS NOT NULL THEN
    v_ev := kiln_retrigger_waiter(s, r.id, v_waiter_trav, v_waiter_upd);
    IF v_ev IS NOT NULL THEN
      v_events := v_events || v_ev;
      v_queued := v_queued + 1;
    END IF;
  END IF;
  IF v_parked IS NOT NULL THEN
    -- Claimed but not begun above (its row busy, time up): the general begin
    -- decides (blocked, a broken lease, a time-out) without waiting, or
    -- answers 'later' and leaves it to the worker.
    v_events := v_events || v_parked_ev;
    IF v_begin_ms IS NOT NULL THEN
      v_begin := kiln_begin_core((v_parked->>'id')::bigint, p_worker, v_begin_ms, true);
      v_settle := coalesce(v_settle, (v_begin->>'settle')::uuid);
      v_events := v_events || ARRAY(SELECT jsonb_array_elements(v_begin->'events'));
      v_lazy := v_lazy AND kiln_begun_lazily(v_begin->'result', v_lazy_types);
    END IF;
    v_claimed := v_claimed || jsonb_build_array(jsonb_build_object('job', v_parked, 'begun', v_begin->'result'));
  END IF;
  v_events := v_events || v_begun_events;
  IF NOT p_emit THEN
    RETURN jsonb_build_object('outcome', 'ok', 'claimed', v_claimed, 'queued', v_queued, 'settle', v_settle, 'stack_id', s.id, 'events', to_jsonb(v_events),
                              'lazy', coalesce(v_lazy, false), 'root_of', v_root_of, 'roots', v_roots_done);
  END IF;
  IF v_lazy THEN PERFORM kiln_commit_lazily(); END IF;
  PERFORM kiln_emit(s.id, to_jsonb(v_events));
  IF v_queued > 0 THEN PERFORM pg_notify('kiln_jobs', ''); END IF;
  RETURN jsonb_build_object('outcome', 'ok', 'claimed', v_claimed, 'queued', v_queued, 'settle', v_settle);
END $$;

-- kiln_finish_nodes: the finishes one worker has ready at the same moment for
-- one stack, in one transaction — one commit, one turn at the event lock —
-- instead of one after another (ten nodes that end together report into the
-- same successors, so their separate finishes would queue on those sync
-- points, each holding them through its commit).
--
-- Lock order (10_events.sql) across the whole batch: the stack row, every
-- row the finishes write (their own, and replacements whose `replaces` a
-- cleanup clears), then every sync point they write, each set in key order.
-- Each finish below then takes only locks the batch already holds, and
-- successors' rows SKIP LOCKED. One stack per batch, so one traversal row,
-- whose roots countdown the batch does once, after the finishes: the row
-- (lock order 4) is then held only through the commit, not through the whole
-- batch — every finish of a wide graph's is a root, and batches that took it
-- at their first root queued on each other for their whole length.
-- p_items: [{ job, result }] (result as for kiln_finish_node); returns the
-- results in the same order.
CREATE OR REPLACE FUNCTION kiln_finish_nodes(p_worker uuid, p_items jsonb) RETURNS jsonb LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_ids bigint[] := ARRAY(SELECT (e->>'job')::bigint FROM jsonb_array_elements(p_items) e);
  v_deleting bigint[] := ARRAY(SELECT (e->>'job')::bigint FROM jsonb_array_elements(p_items) e WHERE (e->'result'->>'deleted')::boolean);
  k record;
  v jsonb;
  v_item jsonb;
  -- jsonb[] accumulators, turned into jsonb once at the end (see kiln_finish_node)
  v_out jsonb[] := '{}';
  v_ev_stacks uuid[] := '{}';
  v_ev_lists jsonb[] := '{}';
  v_queued int := 0;
  v_budget int;
  v_lazy boolean := true;
  v_roots int := 0;
  v_root_of uuid;
  v_last_root int;
  v_pending int;
  v_jobs job[];
  v_rows int[];
BEGIN
  -- Every key looked up one by one (kiln_batch_jobs, 20_begin_node.sql).
  v_jobs := kiln_batch_jobs(v_ids, p_worker);
  -- The rows the finishes write: their own, and a deleted row's replacement
  -- (whose `replaces` its cleanup clears).
  IF cardinality(v_deleting) > 0 THEN
    v_rows := ARRAY(SELECT z.id FROM unnest(v_jobs) x
                     CROSS JOIN LATERAL (SELECT r.id FROM resource r WHERE r.replaces = x.resource_id OFFSET 0) z
                    WHERE x.id = ANY(v_deleting));
  END IF;
  PERFORM kiln_lock_batch(v_jobs, coalesce(v_rows, '{}'));
  -- The sync points each finish will write: its own node and, on success, its
  -- successors (current traversal only), and its row's waiter.
  FOR k IN
    WITH it AS (
      SELECT j.traversal_id, coalesce(j.graph_key_id, j.resource_id) AS node, j.is_update, s.current_traversal_id AS cur,
             r.id AS rid, r.waiter_traversal_id AS wt, r.waiter_is_update AS wu,
             coalesce((e->'result'->>'ok')::boolean, false) AS ok, coalesce(e->'result'->'successors', '[]') AS succs
        FROM jsonb_array_elements(p_items) e
        JOIN unnest(v_jobs) j ON j.id = (e->>'job')::bigint
        CROSS JOIN LATERAL (SELECT s.current_traversal_id FROM stack s WHERE s.id = j.stack_id OFFSET 0) s
        -- the holder checked outside the probe (as in kiln_batch_jobs): inside, a
        -- plan searched every locked row (the lease index) for each row
        CROSS JOIN LATERAL (SELECT r.id, r.engine_id, r.waiter_traversal_id, r.waiter_is_update FROM resource r
                             WHERE r.id = j.resource_id OFFSET 0) r
       WHERE r.engine_id = p_worker
    ), keys AS (
      SELECT cur AS trav, node AS rid, is_update AS upd FROM it WHERE traversal_id = cur
      UNION SELECT cur, (x->>0)::int, (x->>1)::boolean FROM it, jsonb_array_elements(it.succs) x WHERE traversal_id = cur AND ok
      UNION SELECT cur, rid, wu FROM it WHERE wt = cur
    )
    SELECT trav, array_agg(rid) AS rids, array_agg(upd) AS upds FROM keys GROUP BY trav ORDER BY trav
  LOOP
    PERFORM kiln_lock_sync_points(k.trav, k.rids, k.upds);
  END LOOP;

  -- The worker's free slots are one budget for the whole batch, not one per finish.
  v_budget := (SELECT max(coalesce((e->'result'->>'claim_max')::int, 1)) FROM jsonb_array_elements(p_items) e);
  FOR v_item IN SELECT e FROM jsonb_array_elements(p_items) e LOOP
    v := kiln_finish_node((v_item->>'job')::bigint, p_worker,
           jsonb_set(v_item->'result', '{claim_max}', to_jsonb(greatest(v_budget, 0))), false);
    v_budget := v_budget - coalesce(jsonb_array_length(v->'claimed'), 0);
    v_lazy := v_lazy AND coalesce((v->>'lazy')::boolean, false);
    IF v->>'root_of' IS NOT NULL THEN
      v_roots := v_roots + (v->>'roots')::int;
      v_root_of := (v->>'root_of')::uuid;
      v_last_root := cardinality(v_out); -- 0-based index of this item
    END IF;
    IF v ? 'events' THEN
      v_ev_stacks := v_ev_stacks || (v->>'stack_id')::uuid;
      v_ev_lists := v_ev_lists || (v->'events');
      v_queued := v_queued + (v->>'queued')::int;
    END IF;
    v_out := v_out || (v - 'events' - 'stack_id' - 'lazy' - 'root_of' - 'roots');
  END LOOP;
  IF v_roots <> 0 THEN
    UPDATE traversal SET roots_pending = roots_pending - v_roots WHERE id = v_root_of RETURNING roots_pending INTO v_pending;
    IF v_pending = 0 THEN
      v_out[v_last_root + 1] := jsonb_set(v_out[v_last_root + 1], '{settle}', to_jsonb(v_root_of));
    END IF;
  END IF;
  -- Lazily only when every finish of the batch may (a 'gone' one wrote nothing to speak of, but says no).
  IF v_lazy THEN PERFORM kiln_commit_lazily(); END IF;
  PERFORM kiln_emit_each(kiln_events_by_stack(v_ev_stacks, v_ev_lists));
  IF v_queued > 0 THEN PERFORM pg_notify('kiln_jobs', ''); END IF;
  RETURN to_jsonb(v_out);
END $$;

-- kiln_settle: after a node step reported that its traversal may have ended
-- (the last root done, or a failure), decide the stack's status — alone on the
-- stack row. Idempotent; the sweeper calls it too for a caller that died.
CREATE OR REPLACE FUNCTION kiln_settle(p_stack uuid, p_trav uuid) RETURNS text LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  s stack%ROWTYPE;
  t traversal%ROWTYPE;
BEGIN
  SELECT * INTO s FROM stack WHERE id = p_stack FOR NO KEY UPDATE;
  IF NOT FOUND OR s.current_traversal_id IS DISTINCT FROM p_trav THEN RETURN 'stale'; END IF;
  SELECT * INTO t FROM traversal WHERE id = p_trav;
  IF t.outcome IS NOT NULL THEN RETURN t.outcome; END IF;
  IF t.failure_reason IS NOT NULL THEN
    RETURN CASE WHEN kiln_maybe_finish_failed(p_stack, p_trav) THEN 'FAILED' ELSE 'failing' END;
  END IF;
  IF t.roots_pending <= 0 THEN
    PERFORM kiln_complete_traversal(p_stack, p_trav);
    RETURN 'COMPLETE';
  END IF;
  RETURN 'running';
END $$;

-- lib/db/functions/40_replace_node.sql
-- kiln_replace_node: an update node found that its row must be replaced
-- (create-before-delete). In one transaction: insert the replacement row
-- (INIT, `replaces` = old), point the old row's `replaced_by` at it, release the
-- old row unchanged (it stays visible until its cleanup node deletes it), and
-- hand the node to a job for the new row. The new row *impersonates* the old
-- row's graph node: its successors and the stack hear from the node they wait for.
--
-- p_spec: { type, requires: [ids], reason, claim, holds_lock, begin_lease_ms, uuid }
-- uuid: the new row's, when the worker chose it (it starts a state-only
-- type's create under that identity while this call runs: check-resource.ts,
-- "head start"); otherwise a fresh one.
-- With claim and begin_lease_ms the new row is also begun (locked, RUNNING) in
-- this transaction, as kiln_finish_node does for a successor.
-- holds_lock = false for the "row is being deleted by an older traversal" case,
-- where the old row stays locked by that traversal's worker.
-- lazy_types (the worker's state-only types, 10_events.sql): when the old row,
-- the new one and whatever was begun are all of them, the call commits
-- without waiting for the disk, as a finish does. It used to wait: the replace
-- calls of a replace-all queued on the stack's event lock, each holding it
-- through a flush (layered-1000: 15 ms of lock wait per node, --profile).
--
-- With p_emit false (kiln_replace_nodes), the sync points are already locked
-- and the events, the need to notify and whether the call may commit lazily
-- are returned (`stack_id`, `events`, `notify`, `lazy`) for the batch.

CREATE OR REPLACE FUNCTION kiln_replace_node(p_job bigint, p_worker uuid, p_spec jsonb, p_emit boolean DEFAULT true) RETURNS jsonb LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  j job%ROWTYPE;
  s stack%ROWTYPE;
  t traversal%ROWTYPE;
  r resource%ROWTYPE;
  v_new resource%ROWTYPE;
  v_job job%ROWTYPE;
  v_holds boolean := coalesce((p_spec->>'holds_lock')::boolean, true);
  v_claim boolean := coalesce((p_spec->>'claim')::boolean, false);
  v_key int;
  v_events jsonb := '[]';
  v_ev jsonb;
  v_waiter_trav uuid;
  v_waiter_upd boolean;
  v_begin jsonb;
  v_lazy_types jsonb := p_spec->'lazy_types';
  v_lazy boolean;
  v_notify boolean;
BEGIN
  SELECT * INTO j FROM job WHERE id = p_job;
  IF NOT FOUND OR j.locked_by IS DISTINCT FROM p_worker THEN RETURN jsonb_build_object('outcome', 'gone'); END IF;
  SELECT * INTO s FROM stack WHERE id = j.stack_id FOR SHARE;
  SELECT * INTO r FROM resource WHERE id = j.resource_id FOR UPDATE;
  IF v_holds AND r.engine_id IS DISTINCT FROM p_worker THEN
    DELETE FROM job WHERE id = p_job;
    RETURN jsonb_build_object('outcome', 'lock_lost');
  END IF;
  v_key := coalesce(j.graph_key_id, j.resource_id);
  v_waiter_trav := CASE WHEN v_holds THEN r.waiter_traversal_id END;
  v_waiter_upd := CASE WHEN v_holds THEN r.waiter_is_update END;
  IF v_holds THEN
    UPDATE resource SET engine_id = NULL, lock_traversal_id = NULL, lease_expires_at = NULL,
           waiter_traversal_id = NULL, waiter_is_update = NULL, atomic_key = atomic_key + 1, updated_at = now()
     WHERE id = r.id;
  END IF;
  DELETE FROM job WHERE id = p_job;

  IF s.current_traversal_id IS DISTINCT FROM j.traversal_id THEN
    -- Superseded while we were deciding: the newer traversal decides for itself.
    v_ev := kiln_retrigger_waiter(s, r.id, v_waiter_trav, v_waiter_upd);
    IF NOT p_emit THEN
      RETURN jsonb_build_object('outcome', 'stale', 'stack_id', s.id, 'events', CASE WHEN v_ev IS NULL THEN '[]'::jsonb ELSE jsonb_build_array(v_ev) END, 'notify', v_ev IS NOT NULL);
    END IF;
    IF v_ev IS NOT NULL THEN
      PERFORM kiln_emit(s.id, jsonb_build_array(v_ev));
      PERFORM pg_notify('kiln_jobs', '');
    END IF;
    RETURN jsonb_build_object('outcome', 'stale');
  END IF;

  SELECT * INTO t FROM traversal WHERE id = j.traversal_id;
  INSERT INTO resource (uuid, stack_id, name, type, action, status, current_template_id, requires, replaces, last_traversal_id)
  VALUES (coalesce((p_spec->>'uuid')::uuid, gen_random_uuid()), s.id, r.name, coalesce(p_spec->>'type', r.type), 'INIT', 'COMPLETE', t.raw_template_id,
          ARRAY(SELECT jsonb_array_elements_text(coalesce(p_spec->'requires', '[]'))::int), r.id, t.id)
  RETURNING * INTO v_new;
  UPDATE resource SET replaced_by = v_new.id, atomic_key = atomic_key + 1 WHERE id = r.id;
  IF p_emit THEN
    PERFORM kiln_lock_sync_points(t.id, ARRAY[v_key, CASE WHEN v_waiter_trav = t.id THEN r.id END], ARRAY[true, v_waiter_upd]);
  END IF;
  UPDATE sync_point SET state = 'READY', actor_id = v_new.id, updated_at = now()
   WHERE traversal_id = t.id AND resource_id = v_key AND is_update = true;
  INSERT INTO job (kind, stack_id, traversal_id, resource_id, is_update, graph_key_id, locked_by, locked_at, attempts)
  VALUES ('check_resource', s.id, t.id, v_new.id, true, v_key,
          CASE WHEN v_claim THEN p_worker END, CASE WHEN v_claim THEN now() END, CASE WHEN v_claim THEN 1 ELSE 0 END)
  RETURNING * INTO v_job;
  v_events := v_events || kiln_ev('node', t.id, r.id, r.name, r.physical_id, NULL, NULL,
    'replaced: ' || coalesce(p_spec->>'reason', 'replacement required'),
    jsonb_build_object('rid', v_key, 'update', true, 'state', 'READY', 'replaced_by', v_new.id, 'lock', CASE WHEN v_holds THEN 'released' END));
  v_ev := kiln_retrigger_waiter(s, r.id, v_waiter_trav, v_waiter_upd);
  IF v_ev IS NOT NULL THEN v_events := v_events || v_ev; END IF;
  IF v_claim AND p_spec ? 'begin_lease_ms' THEN
    v_begin := kiln_begin_core(v_job.id, p_worker, (p_spec->>'begin_lease_ms')::int, true);
    v_events := v_events || (v_begin->'events');
  END IF;
  v_lazy := coalesce(v_lazy_types ? r.type AND v_lazy_types ? v_new.type, false)
            AND (v_begin IS NULL OR kiln_begun_lazily(v_begin->'result', v_lazy_types));
  v_notify := NOT v_claim OR v_ev IS NOT NULL;
  IF NOT p_emit THEN
    RETURN jsonb_build_object('outcome', 'ok', 'replacement', to_jsonb(v_new), 'claimed', CASE WHEN v_claim THEN to_jsonb(v_job) END,
      'begun', v_begin->'result', 'settle', v_begin->'settle', 'stack_id', s.id, 'events', v_events, 'notify', v_notify, 'lazy', v_lazy);
  END IF;
  IF v_lazy THEN PERFORM kiln_commit_lazily(); END IF;
  PERFORM kiln_emit(s.id, v_events);
  IF v_notify THEN PERFORM pg_notify('kiln_jobs', ''); END IF;
  RETURN jsonb_build_object('outcome', 'ok', 'replacement', to_jsonb(v_new), 'claimed', CASE WHEN v_claim THEN to_jsonb(v_job) END,
    'begun', v_begin->'result', 'settle', v_begin->'settle');
END $$;

-- kiln_replace_nodes: the replace calls one worker has ready at the same
-- moment, in one transaction: one commit and one turn at the stack's event
-- lock instead of one each (a replace-all's first layer sends ten at once,
-- which queued on that lock). Lock order (10_events.sql) across the batch:
-- the stacks, the old rows, then every sync point the calls write (each
-- node's, and a waiter's in the stack's current traversal), each set in key
-- order; each call inside takes only locks the batch holds (its new row is
-- its own). p_items: [{ job, spec }] (spec as for kiln_replace_node); returns
-- the results in the same order.
CREATE OR REPLACE FUNCTION kiln_replace_nodes(p_worker uuid, p_items jsonb) RETURNS jsonb LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_ids bigint[] := ARRAY(SELECT (e->>'job')::bigint FROM jsonb_array_elements(p_items) e);
  k record;
  v jsonb;
  v_item jsonb;
  v_out jsonb[] := '{}';
  v_ev_stacks uuid[] := '{}';
  v_ev_lists jsonb[] := '{}';
  v_lazy boolean := true;
  v_notify boolean := false;
  v_jobs job[];
BEGIN
  -- Every key looked up one by one (kiln_batch_jobs, 20_begin_node.sql).
  v_jobs := kiln_batch_jobs(v_ids, p_worker);
  PERFORM kiln_lock_batch(v_jobs);
  FOR k IN
    WITH it AS (
      SELECT j.traversal_id, s.current_traversal_id AS cur, coalesce(j.graph_key_id, j.resource_id) AS node,
             r.id AS rid, r.waiter_traversal_id AS wt, r.waiter_is_update AS wu,
             coalesce((e->'spec'->>'holds_lock')::boolean, true) AS holds
        FROM jsonb_array_elements(p_items) e
        JOIN unnest(v_jobs) j ON j.id = (e->>'job')::bigint
        CROSS JOIN LATERAL (SELECT s.current_traversal_id FROM stack s WHERE s.id = j.stack_id OFFSET 0) s
        CROSS JOIN LATERAL (SELECT r.id, r.waiter_traversal_id, r.waiter_is_update FROM resource r WHERE r.id = j.resource_id OFFSET 0) r
    ), keys AS (
      SELECT cur AS trav, node AS rid, true AS upd FROM it WHERE traversal_id = cur
      UNION SELECT cur, rid, wu FROM it WHERE holds AND wt = cur
    )
    SELECT trav, array_agg(rid) AS rids, array_agg(upd) AS upds FROM keys GROUP BY trav ORDER BY trav
  LOOP
    PERFORM kiln_lock_sync_points(k.trav, k.rids, k.upds);
  END LOOP;

  FOR v_item IN SELECT e FROM jsonb_array_elements(p_items) e LOOP
    v := kiln_replace_node((v_item->>'job')::bigint, p_worker, v_item->'spec', false);
    -- Lazily only when every call of the batch may (a 'gone' one wrote nothing, but says no).
    v_lazy := v_lazy AND coalesce((v->>'lazy')::boolean, false);
    v_notify := v_notify OR coalesce((v->>'notify')::boolean, false);
    IF v ? 'events' THEN
      v_ev_stacks := v_ev_stacks || (v->>'stack_id')::uuid;
      v_ev_lists := v_ev_lists || (v->'events');
    END IF;
    v_out := v_out || (v - 'events' - 'stack_id' - 'lazy' - 'notify');
  END LOOP;
  IF v_lazy THEN PERFORM kiln_commit_lazily(); END IF;
  PERFORM kiln_emit_each(kiln_events_by_stack(v_ev_stacks, v_ev_lists));
  IF v_notify THEN PERFORM pg_notify('kiln_jobs', ''); END IF;
  RETURN to_jsonb(v_out);
END $$;

-- An in-place update is about to start: show UPDATE_IN_PROGRESS (creates and
-- deletes are recorded when the lock is taken; updates only once we know the
-- node really changes something). Lazily for a row of a state-only type
-- (p_lazy_types, 10_events.sql), as every other step on such a row: this mark
-- used to wait for the disk while it held the stack's event lock, and a
-- layer's marks queued on each other there.
CREATE OR REPLACE FUNCTION kiln_mark_in_progress(p_job bigint, p_worker uuid, p_action text, p_lazy_types jsonb) RETURNS boolean LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  j job%ROWTYPE;
  r resource%ROWTYPE;
BEGIN
  SELECT * INTO j FROM job WHERE id = p_job;
  IF NOT FOUND OR j.locked_by IS DISTINCT FROM p_worker THEN RETURN false; END IF;
  PERFORM 1 FROM stack WHERE id = j.stack_id FOR SHARE;
  UPDATE resource SET action = p_action, status = 'IN_PROGRESS', status_reason = 'state changed',
         atomic_key = atomic_key + 1, updated_at = now()
   WHERE id = j.resource_id AND engine_id = p_worker RETURNING * INTO r;
  IF NOT FOUND THEN RETURN false; END IF;
  IF p_lazy_types ? r.type THEN PERFORM kiln_commit_lazily(); END IF;
  PERFORM kiln_emit(j.stack_id, jsonb_build_array(kiln_in_progress_ev(j.traversal_id, r, p_action, coalesce(j.graph_key_id, r.id), j.is_update)));
  RETURN true;
END $$;

-- Before a create with effects outside Kiln runs: the properties it is
-- about to use (resource.pending_properties), so that the cleanup of a row
-- whose worker died mid-create can find what it made. False when the lock is
-- no longer ours (the action must not run).
CREATE OR REPLACE FUNCTION kiln_record_intent(p_job bigint, p_worker uuid, p_properties jsonb) RETURNS boolean LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_rid int;
BEGIN
  SELECT resource_id INTO v_rid FROM job WHERE id = p_job AND locked_by = p_worker;
  IF NOT FOUND THEN RETURN false; END IF;
  UPDATE resource SET pending_properties = p_properties, updated_at = now()
   WHERE id = v_rid AND engine_id = p_worker;
  IF NOT FOUND THEN
    -- Our lease ran out and the lock was broken; whoever broke it re-runs the node (as in kiln_finish_node).
    DELETE FROM job WHERE id = p_job;
    RETURN false;
  END IF;
  RETURN true;
END $$;

-- Progress reported by a resource action (throttled by the worker).
CREATE OR REPLACE FUNCTION kiln_node_progress(p_job bigint, p_worker uuid, p_message text, p_fraction double precision) RETURNS void LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  j job%ROWTYPE;
  r resource%ROWTYPE;
BEGIN
  SELECT * INTO j FROM job WHERE id = p_job;
  IF NOT FOUND OR j.locked_by IS DISTINCT FROM p_worker THEN RETURN; END IF;
  PERFORM 1 FROM stack WHERE id = j.stack_id FOR SHARE;
  SELECT * INTO r FROM resource WHERE id = j.resource_id;
  PERFORM kiln_emit(j.stack_id, jsonb_build_array(kiln_ev('progress', j.traversal_id, r.id, r.name, r.physical_id, NULL, NULL, p_message,
    jsonb_build_object('rid', coalesce(j.graph_key_id, r.id), 'update', j.is_update, 'fraction', p_fraction))));
END $$;

-- lib/db/functions/50_sweep.sql
-- The sweeper: what keeps a traversal from ever stalling (Heat §6.2: a lost
-- message or a dead engine leaves Heat's stack IN_PROGRESS forever). Every
-- worker runs it on a timer (the earliest lease or deadline, with jitter); it is
-- idempotent and serialised per stack by the stack row lock.
--
--   a. locks whose lease ran out (the holder stopped heartbeating): broken, the
--      row marked FAILED, a waiting newer node retriggered, and the holder's own
--      node re-run if its traversal is still current;
--   b. jobs claimed by workers that stopped heartbeating: returned to the queue;
--   c. traversals past their deadline: failed ('Timed out'), in-flight actions
--      told to abort (NOTIFY kiln_abort);
--   d. lost messages: READY nodes with no job, BLOCKED nodes whose row is no
--      longer locked (the retrigger went missing), RUNNING nodes whose row is
--      not locked by anyone: put back in the queue;
--   e. a traversal whose last root reported, or that failed, but whose stack
--      was not settled (the worker died between its finish and kiln_settle).

-- A node that should have a message and has none: READY without a job, or
-- BLOCKED/RUNNING on a row nobody holds (the retrigger or the holder went
-- missing). Not younger than 2 s: its step may still be committing. A READY
-- node waiting in a long queue is not lost (its job exists): with 10,000
-- nodes that is most of them, and the check is one anti-join over the queue,
-- never a scan of the queue per node. No index finds a node's job by its
-- key, so a nested loop would read the traversal's whole queue once per node
-- (the plan PostgreSQL chose whenever its statistics said the queue was
-- small: 2.3 million index entries, 1.25 million rows, for one sweep of a 1,600-node traversal,
-- test/db/plans.test.ts). Hence no nested loops: the queue is hashed once.
CREATE OR REPLACE FUNCTION kiln_lost_nodes(p_trav uuid) RETURNS SETOF sync_point LANGUAGE sql STABLE SET enable_nestloop = off AS $$
  SELECT sp.* FROM sync_point sp
   WHERE sp.traversal_id = p_trav AND sp.state IN ('READY', 'BLOCKED', 'RUNNING') AND sp.updated_at < now() - interval '2 seconds'
     AND NOT EXISTS (SELECT 1 FROM job j WHERE j.stack_id = sp.stack_id AND j.traversal_id = sp.traversal_id AND coalesce(j.graph_key_id, j.resource_id) = sp.resource_id
                       AND j.is_update = sp.is_update AND j.kind = 'check_resource')
     AND (sp.state = 'READY' OR NOT EXISTS (SELECT 1 FROM resource x WHERE x.id = coalesce(sp.actor_id, sp.resource_id) AND x.engine_id IS NOT NULL))
$$;

CREATE OR REPLACE FUNCTION kiln_sweep_candidates(p_lease_ms int) RETURNS TABLE (stack_id uuid) LANGUAGE sql STABLE AS $$
  SELECT r.stack_id FROM resource r WHERE r.engine_id IS NOT NULL AND r.lease_expires_at < now()
  UNION
  SELECT j.stack_id FROM job j
   WHERE j.locked_by IS NOT NULL AND j.locked_at < now() - p_lease_ms * interval '1 millisecond'
     AND NOT EXISTS (SELECT 1 FROM worker w WHERE w.id = j.locked_by AND w.stopped_at IS NULL
                       AND w.heartbeat_at > now() - p_lease_ms * interval '1 millisecond')
  UNION
  SELECT t.stack_id FROM traversal t WHERE t.outcome IS NULL AND (t.deadline < now() OR t.failure_reason IS NOT NULL OR t.roots_pending <= 0)
  UNION
  SELECT t.stack_id FROM traversal t
   WHERE t.outcome IS NULL AND t.failure_reason IS NULL AND EXISTS (SELECT 1 FROM kiln_lost_nodes(t.id))
$$;

CREATE OR REPLACE FUNCTION kiln_sweep_stack(p_stack uuid, p_lease_ms int) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  s stack%ROWTYPE;
  t traversal%ROWTYPE;
  r resource%ROWTYPE;
  sp sync_point%ROWTYPE;
  dj job%ROWTYPE;
  -- a jsonb[] (see kiln_finish_node): after a crash one sweep may requeue thousands of nodes
  v_events jsonb[] := '{}';
  v_ev jsonb;
  v_broken int := 0;
  v_requeued int := 0;
  v_released int := 0;
  v_timed_out boolean := false;
  v_lease interval := p_lease_ms * interval '1 millisecond';
  -- rows whose dead holder acted for the current traversal: their nodes run again
  v_rerun int[] := '{}';
BEGIN
  SELECT * INTO s FROM stack WHERE id = p_stack FOR NO KEY UPDATE;
  IF NOT FOUND THEN RETURN '{}'; END IF;

  -- a. expired locks
  FOR r IN SELECT * FROM resource WHERE stack_id = p_stack AND engine_id IS NOT NULL AND lease_expires_at < now() ORDER BY id FOR UPDATE LOOP
    v_broken := v_broken + 1;
    v_events := v_events || kiln_break_dead_lock(r, true);
    v_ev := kiln_retrigger_waiter(s, r.id, r.waiter_traversal_id, r.waiter_is_update);
    IF v_ev IS NOT NULL THEN v_events := v_events || v_ev; v_requeued := v_requeued + 1; END IF;
    IF s.current_traversal_id IS NOT DISTINCT FROM r.lock_traversal_id THEN v_rerun := v_rerun || r.id; END IF;
  END LOOP;
  -- Re-run the holders' nodes: their jobs (claimed by the dead worker) go back
  -- to the queue. One statement for all of them: a lookup per broken lock, by
  -- traversal and row, scanned the job table each time (64 broken locks, 64
  -- sequential scans of the whole queue; test/db/plans.test.ts).
  IF cardinality(v_rerun) > 0 THEN
    FOR dj IN SELECT * FROM job WHERE stack_id = p_stack AND traversal_id = s.current_traversal_id AND resource_id = ANY(v_rerun)
                 AND kind = 'check_resource' ORDER BY id FOR UPDATE LOOP
      UPDATE job SET locked_by = NULL, locked_at = NULL WHERE id = dj.id;
      UPDATE sync_point SET state = 'READY', updated_at = now()
       WHERE traversal_id = dj.traversal_id AND resource_id = coalesce(dj.graph_key_id, dj.resource_id) AND is_update = dj.is_update
         AND state = 'RUNNING';
      v_requeued := v_requeued + 1;
    END LOOP;
  END IF;

  -- b. jobs claimed by dead workers
  FOR dj IN SELECT * FROM job j WHERE j.stack_id = p_stack AND j.locked_by IS NOT NULL AND j.locked_at < now() - v_lease
      AND NOT EXISTS (SELECT 1 FROM worker w WHERE w.id = j.locked_by AND w.stopped_at IS NULL AND w.heartbeat_at > now() - v_lease)
      FOR UPDATE LOOP
    UPDATE job SET locked_by = NULL, locked_at = NULL WHERE id = dj.id;
    v_released := v_released + 1;
  END LOOP;

  SELECT * INTO t FROM traversal WHERE id = s.current_traversal_id AND outcome IS NULL;
  IF FOUND THEN
    -- c. deadline
    IF t.deadline < now() AND t.failure_reason IS NULL THEN
      UPDATE traversal SET failure_reason = 'Timed out' WHERE id = t.id;
      t.failure_reason := 'Timed out';
      v_timed_out := true;
      v_events := v_events || kiln_ev('stack', t.id, NULL, NULL, NULL, t.action, 'IN_PROGRESS', 'Timed out', jsonb_build_object('failing', true));
      PERFORM pg_notify('kiln_abort', json_build_object('stack_id', s.id, 'traversal_id', t.id, 'mode', 'this', 'reason', 'timed out')::text);
    END IF;
    -- d. lost messages (only when the traversal is still scheduling)
    IF t.failure_reason IS NULL THEN
      FOR sp IN SELECT * FROM kiln_lost_nodes(t.id) LOOP
        UPDATE sync_point SET state = 'READY', updated_at = now()
         WHERE traversal_id = sp.traversal_id AND resource_id = sp.resource_id AND is_update = sp.is_update;
        INSERT INTO job (kind, stack_id, traversal_id, resource_id, is_update, graph_key_id)
        VALUES ('check_resource', s.id, t.id, coalesce(sp.actor_id, sp.resource_id), sp.is_update,
                CASE WHEN sp.actor_id IS NOT NULL AND sp.actor_id <> sp.resource_id THEN sp.resource_id END);
        v_requeued := v_requeued + 1;
        v_events := v_events || kiln_ev('node', t.id, sp.resource_id, NULL, NULL, NULL, NULL, 'requeued by the sweeper',
          jsonb_build_object('rid', sp.resource_id, 'update', sp.is_update, 'state', 'READY', 'requeued', true));
      END LOOP;
    END IF;
  END IF;

  PERFORM kiln_emit(s.id, to_jsonb(v_events));
  -- e. settle (complete or fail the stack) if its traversal ended
  IF t.id IS NOT NULL THEN PERFORM kiln_settle(s.id, t.id); END IF;
  IF v_requeued > 0 OR v_released > 0 THEN PERFORM pg_notify('kiln_jobs', ''); END IF;
  RETURN jsonb_build_object('broken', v_broken, 'requeued', v_requeued, 'released', v_released, 'timed_out', v_timed_out);
END $$;

-- Heartbeat: a worker proves it is alive and extends the leases of the locks it holds.
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
