-- DropIndex
DROP INDEX "job_locked_by_idx";

-- AlterTable
ALTER TABLE "job" ADD COLUMN     "abort" TEXT,
ADD COLUMN     "park" JSONB,
ADD COLUMN     "parked_until" TIMESTAMPTZ(3),
ADD COLUMN     "project_id" UUID,
ADD COLUMN     "wake_key" TEXT;
-- Jobs queued before this migration: their stacks' projects.
UPDATE "job" j SET "project_id" = s."project_id" FROM "stack" s WHERE s."id" = j."stack_id";
DELETE FROM "job" WHERE "project_id" IS NULL;
ALTER TABLE "job" ALTER COLUMN "project_id" SET NOT NULL;

-- CreateTable
CREATE TABLE "wake" (
    "key" TEXT NOT NULL,
    "seq" BIGINT NOT NULL DEFAULT 0,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "wake_pkey" PRIMARY KEY ("key")
);

-- lib/db/functions/00_indexes.sql
-- The claim (22_claim.sql) scans only ready jobs: unclaimed, not parked. It
-- finds the projects that have any (one probe per project, a loose index
-- scan on the key's first column) and each project's oldest first.
CREATE INDEX IF NOT EXISTS job_ready_idx ON job (project_id, id) WHERE locked_by IS NULL AND parked_until IS NULL;

-- A worker's claimed jobs (given back on shutdown or after an ambiguous
-- failure). Partial: with every unclaimed job in it, a plan could count the
-- ready jobs through it (`locked_by IS NULL`) and read every parked job's
-- entry on every claim.
CREATE INDEX IF NOT EXISTS job_holder_idx ON job (locked_by) WHERE locked_by IS NOT NULL;

-- Parked nodes (25_park.sql): a stack's (aborts, a failing traversal's
-- settle), the next one due (the sweeper's timer), and those a wake key names.
-- Few at any time, so each index is small; none is on the hot path.
CREATE INDEX IF NOT EXISTS job_parked_stack_idx ON job (stack_id) WHERE park IS NOT NULL;

CREATE INDEX IF NOT EXISTS job_parked_until_idx ON job (parked_until) WHERE parked_until IS NOT NULL;

CREATE INDEX IF NOT EXISTS job_wake_key_idx ON job (wake_key) WHERE wake_key IS NOT NULL;

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
--   6. with p_abort, NOTIFY kiln_abort (a delete stops in-flight actions),
--      and wake the parked nodes it names to stop (kiln_abort_jobs).
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
  v_project uuid;
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
   WHERE id = p_stack RETURNING project_id INTO v_project;

  IF v_nodes > 0 THEN
    INSERT INTO sync_point (traversal_id, resource_id, is_update, stack_id, required, state, successors)
    SELECT p_trav, r, u, p_stack, q, CASE WHEN q = 0 THEN 'READY' ELSE 'WAITING' END, s
      FROM unnest(p_rids, p_upds, p_required, p_successors) AS x(r, u, q, s);
    INSERT INTO job (kind, stack_id, project_id, traversal_id, resource_id, is_update)
    SELECT 'check_resource', p_stack, v_project, p_trav, r, u
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
    PERFORM kiln_abort_jobs(p_abort);
  END IF;
END $$;

-- lib/db/functions/20_begin_node.sql
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
  IF j.park IS NOT NULL AND s.id IS NOT NULL THEN
    -- A parked node, woken (25_park.sql): it holds its row whatever became of its traversal.
    v_lock := kiln_resume_node(j, s, p_worker, p_lease_ms, p_nowait);
    IF v_lock IS NOT NULL THEN RETURN v_lock; END IF;
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
    -- Held by a live worker of an older traversal: stop here. The holder
    -- retriggers this node when it lets go (kiln_retrigger_waiter). A newer
    -- traversal's node overwrites an older waiter: only the newest matters.
    -- An update node waits for a delete it will undo too (as Heat does): the
    -- deleted row is then replaced. A replacement made beside the running
    -- delete would contend with it for whatever the two share outside Kiln
    -- (a Kiln::File's path, a database's name), which the delete still holds.
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

-- lib/db/functions/22_claim.sql
-- Claiming: a worker takes ready jobs from the queue (graphile-worker's
-- pattern: FOR UPDATE SKIP LOCKED, woken by NOTIFY kiln_jobs), fairly between
-- projects, and begins each node in the same transaction.
--
-- Fair between projects. The queue is shared by every tenant; taken oldest
-- first, one project's 5,000 ready nodes would be claimed before another's
-- single node queued a moment later, and its long actions could hold every
-- slot. So:
--   - a claim takes turns between the projects that have ready jobs (each
--     project's oldest first), filling the claim like water poured over them:
--     each gets an equal part of what is left, and what a project cannot use
--     (it has fewer ready jobs, or is at its cap) goes to the others. When the
--     claim cannot serve them all (one free slot, say), the project with the
--     fewest jobs in flight on this worker goes first, then the one whose
--     oldest job waited longest: a backlog queued first cannot keep a project
--     that holds nothing from its turn;
--   - a project may hold at most p_cap of this worker's slots (the worker
--     passes how many it holds now, p_used: {project id: jobs in flight}),
--     so the others always find slots free (KILN_PROJECT_SLOT_SHARE).
-- A parked node (25_park.sql) is not ready and holds no slot.

-- kiln_pick_jobs: which ready jobs a claim of up to p_limit takes, locked FOR
-- UPDATE SKIP LOCKED (not yet marked claimed), and whether it left ready jobs
-- of a project at its cap behind (the worker then claims again when one of
-- its slots frees up: those jobs announced themselves already).
-- Every probe is a key lookup on job_ready_idx: one per project to find the
-- projects with ready jobs (a loose index scan) and their oldest job, then
-- one range read per project and pass. A range starts after the last job
-- taken, written as a row comparison on the index's whole key, which only
-- that index can serve: written `id > last`, a generic plan made after an
-- ANALYZE read the primary key from the first job up instead (every claimed
-- job, per probe). And no index-only scans (enable_indexonlyscan = off in
-- kiln_claim_jobs): one re-reads the heap for the entries of claimed jobs
-- that a plain index scan marks dead. Either made 44 job rows read per
-- claimed job (test/db/plans.test.ts). Compared with the wall clock, not the
-- transaction's start: run_at is stored to the millisecond (rounded), so a job
-- just made ready could otherwise look a fraction of a millisecond in the future.
CREATE OR REPLACE FUNCTION kiln_pick_jobs(p_limit int, p_cap int DEFAULT NULL, p_used jsonb DEFAULT '{}', OUT ids bigint[], OUT capped boolean)
LANGUAGE plpgsql AS $$
DECLARE
  v_projects uuid[];
  v_left int[];
  v_last bigint[];
  v_open boolean[];
  v_n int;
  v_i int;
  v_active int;
  v_share int;
  v_want int;
  v_got bigint[];
  v_remaining int := p_limit;
BEGIN
  ids := '{}';
  capped := false;
  IF p_limit <= 0 THEN RETURN; END IF;
  -- The projects with ready jobs, the one with the fewest jobs in flight here
  -- first (then the one whose oldest job waited longest), each with what it may
  -- still take on this worker.
  -- A loose index scan: each probe finds the next project's oldest ready job.
  WITH RECURSIVE ps(p, head) AS (
    (SELECT project_id, id FROM job WHERE locked_by IS NULL AND parked_until IS NULL ORDER BY project_id, id LIMIT 1)
    UNION ALL
    SELECT n.project_id, n.id FROM ps CROSS JOIN LATERAL (
      SELECT project_id, id FROM job WHERE locked_by IS NULL AND parked_until IS NULL AND project_id > ps.p
       ORDER BY project_id, id LIMIT 1) n
  )
  SELECT array_agg(p ORDER BY used, head), array_agg(greatest(coalesce(p_cap, p_limit) - used, 0) ORDER BY used, head)
    INTO v_projects, v_left
    FROM (SELECT p, head, coalesce((p_used->>p::text)::int, 0) AS used FROM ps) x;
  v_n := coalesce(cardinality(v_projects), 0);
  IF v_n = 0 THEN RETURN; END IF;
  v_last := array_fill(0::bigint, ARRAY[v_n]);
  v_open := array_fill(true, ARRAY[v_n]);
  LOOP
    SELECT count(*) INTO v_active FROM unnest(v_open, v_left) AS x(o, l) WHERE o AND l > 0;
    EXIT WHEN v_active = 0 OR v_remaining <= 0;
    v_share := ceil(v_remaining::numeric / v_active)::int;
    FOR v_i IN 1 .. v_n LOOP
      CONTINUE WHEN NOT v_open[v_i] OR v_left[v_i] <= 0;
      v_want := least(v_share, v_left[v_i], v_remaining);
      EXIT WHEN v_want <= 0;
      SELECT coalesce(array_agg(x.id ORDER BY x.id), '{}') INTO v_got
        FROM (SELECT id FROM job
               WHERE (project_id, id) > (v_projects[v_i], v_last[v_i]) AND project_id = v_projects[v_i]
                 AND locked_by IS NULL AND parked_until IS NULL AND run_at <= clock_timestamp()
               ORDER BY project_id, id LIMIT v_want FOR UPDATE SKIP LOCKED) x;
      ids := ids || v_got;
      v_remaining := v_remaining - cardinality(v_got);
      v_left[v_i] := v_left[v_i] - cardinality(v_got);
      IF cardinality(v_got) > 0 THEN v_last[v_i] := v_got[cardinality(v_got)]; END IF;
      -- Fewer than asked for: the project has no more ready jobs this claim can take.
      IF cardinality(v_got) < v_want THEN v_open[v_i] := false; END IF;
    END LOOP;
  END LOOP;
  -- A project stopped by its cap with ready jobs left.
  FOR v_i IN 1 .. CASE WHEN p_cap IS NULL THEN 0 ELSE v_n END LOOP
    IF v_open[v_i] AND v_left[v_i] <= 0 AND EXISTS (
        SELECT 1 FROM job WHERE (project_id, id) > (v_projects[v_i], v_last[v_i]) AND project_id = v_projects[v_i]
                            AND locked_by IS NULL AND parked_until IS NULL) THEN
      capped := true;
      EXIT;
    END IF;
  END LOOP;
END $$;

-- Mark picked jobs claimed by p_worker. By key (`id = ANY(…)`): joined to the
-- pick, a plan made after an ANALYZE walked the job primary key from its start
-- to the picked ids, every older job once per claim (test/db/plans.test.ts).
CREATE OR REPLACE FUNCTION kiln_mark_claimed(p_worker uuid, p_ids bigint[]) RETURNS SETOF job LANGUAGE sql AS $$
  UPDATE job SET locked_by = p_worker, locked_at = now(), attempts = attempts + 1
   WHERE job.id = ANY(p_ids)
  RETURNING job.*
$$;

-- kiln_claim: claim up to p_limit ready jobs (kiln_pick_jobs, no cap), without
-- beginning them (the step-by-step scenario harness).
CREATE OR REPLACE FUNCTION kiln_claim(p_worker uuid, p_limit int) RETURNS SETOF job LANGUAGE sql AS $$
  SELECT * FROM kiln_mark_claimed(p_worker, (SELECT ids FROM kiln_pick_jobs(p_limit)))
$$;

-- kiln_claim_jobs: claim up to p_limit ready jobs (kiln_pick_jobs, with the
-- project cap p_cap and this worker's jobs in flight per project, p_used) and
-- begin each check_resource job in the same transaction, so a queued node
-- costs one round trip before its action, not two. A begin that would have to
-- wait for a lock answers 'later' and its job is returned claimed but not
-- begun. Events are published per stack, in stack order, at the end (lock
-- order 5).
-- Returns { jobs: [{ job, begun }], settle: [{ stack_id, traversal_id }], capped }.
-- Commits lazily when every node it locked is of a type in p_lazy_types and
-- it claimed nothing but node jobs (10_events.sql).
--
-- A fair share between workers, not all it has room for: one NOTIFY wakes
-- every worker, and the first to claim used to take a whole burst (ten roots,
-- say) while the others found nothing; its inline continuations then kept the
-- traversal on that one process, the others idle. It takes ceil(available /
-- claimers), where the claimers are itself and every other live worker (state
-- running, heartbeat within a lease) that has not claimed in the last 20 ms: a
-- worker claiming at the same moment cannot see this claim and takes its own
-- share; one that already took its share does not count, so the last claimer
-- of a burst takes the rest. Each claim of a non-empty queue stamps its
-- worker's row (last_claim_at; the worker row comes before every other lock,
-- as in the heartbeat). The check once looked for each worker's recent claims
-- among the jobs, and after an ANALYZE that saw one worker's claims its cached
-- plan read every claimed job per worker: 21.5 job rows per claimed job
-- instead of 11 with four workers and 64 in flight (test/db/plans.test.ts).
-- What it leaves it announces with a NOTIFY, so no job waits for a timer; only
-- a claim that took something does, so the rounds end (two workers both at a
-- project's cap do not wake each other for ever).
-- Measured (layered-100, D = 0.2 s, two workers): the first layer's finishes
-- returned in 13 ms instead of 26 ms.
--
-- No bitmap scans: a bitmap index scan reads the whole index before any
-- LIMIT applies, so the count of ready jobs read the entire queue on every
-- claim (a cached plan chose it: ~1,600 index entries per claim of 8 from a
-- 1,600-job queue, test/db/plans.test.ts). A plain index scan stops at the limit.
-- Its arguments changed (the project cap and the jobs in flight per project).
DROP FUNCTION IF EXISTS kiln_claim_jobs(uuid, int, int, jsonb);

CREATE OR REPLACE FUNCTION kiln_claim_jobs(p_worker uuid, p_limit int, p_lease_ms int, p_lazy_types jsonb DEFAULT NULL, p_cap int DEFAULT NULL, p_used jsonb DEFAULT '{}')
RETURNS jsonb LANGUAGE plpgsql SET enable_seqscan = off SET enable_bitmapscan = off SET enable_indexonlyscan = off SET plan_cache_mode = force_generic_plan AS $$
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
  v_pick record;
BEGIN
  -- Counted up to what any share could need (8 claimers' worth).
  SELECT count(*) INTO v_avail FROM (
    SELECT 1 FROM job WHERE locked_by IS NULL AND parked_until IS NULL AND run_at <= clock_timestamp() LIMIT p_limit * 8) a;
  IF v_avail > 0 THEN
    UPDATE worker SET last_claim_at = clock_timestamp() WHERE id = p_worker;
  END IF;
  IF v_avail > 1 THEN
    SELECT count(*) INTO v_others FROM worker w
     WHERE w.id <> p_worker AND w.state = 'running' AND w.stopped_at IS NULL
       AND w.heartbeat_at > now() - p_lease_ms * interval '1 millisecond'
       AND (w.last_claim_at IS NULL OR w.last_claim_at <= clock_timestamp() - interval '20 milliseconds');
    v_take := least(p_limit, ceil(v_avail::numeric / (1 + v_others))::int);
  END IF;
  SELECT * INTO v_pick FROM kiln_pick_jobs(CASE WHEN v_avail > 0 THEN v_take ELSE 0 END, p_cap, coalesce(p_used, '{}'));
  IF v_others > 0 AND cardinality(v_pick.ids) > 0 AND v_avail > cardinality(v_pick.ids) THEN PERFORM pg_notify('kiln_jobs', ''); END IF;
  FOR v_job IN SELECT * FROM kiln_mark_claimed(p_worker, v_pick.ids) ORDER BY stack_id, id LOOP
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
  RETURN jsonb_build_object('jobs', to_jsonb(v_out), 'settle', v_settle, 'capped', v_pick.capped);
END $$;

-- lib/db/functions/25_park.sql
-- Parking: a node whose action waits (a wait condition for its signals; later
-- a hook, a nested stack, a provider's long operation) gives its worker slot
-- back while it waits. A worker slot is a process's capacity; a wait that held
-- one let one tenant's 140 waiting conditions hold every slot of two workers
-- for as long as their timeouts (up to 12 hours).
--
-- A parked node keeps:
--   - its row's lock, held by no worker: engine_id = kiln_parked_holder(), no
--     lease (nothing heartbeats for it, and the sweeper breaks only expired
--     leases), lock_traversal_id its traversal. A newer traversal's node finds
--     the row locked and becomes its waiter, as with any holder;
--   - its job, unclaimed and not ready: `park` (since, until, the row's state
--     before the node began, the node's inputs), `parked_until` (when its wait
--     ends at the latest) and `wake_key` (what wakes it sooner);
--   - its sync point, RUNNING: it is in flight.
-- It is woken by
--   - kiln_wake(key): what it waits for happened (a signal was stored);
--   - kiln_wake_due(): its time is up (the sweeper, on the timer every worker
--     sets to the earliest parked_until);
--   - kiln_abort_jobs(notice): a stack delete, a preempting update, its
--     traversal timing out or failing; the job then carries `abort`.
-- Woken, its job is ready again and a worker claims it like any other; its
-- begin (kiln_resume_node) takes the row's lock over from the park and runs
-- the action again from its start, with the park's deadline and the inputs it
-- parked with (those of a superseded traversal are gone by then). The action
-- then finds what it waited for, or parks again, or fails.
--
-- A wake between the action's look and its park must not be slept through.
-- The action reads the key's count (wake.seq) before it looks; kiln_park_node
-- locks the key's wake row and parks only if the count is unchanged, and
-- kiln_wake bumps the count under the same row lock before it wakes parked
-- jobs: either the park sees the new count (and answers 'again'), or the wake
-- sees the parked job. Lock order: the wake row comes after the resource rows
-- and before the job rows it wakes; the waking side takes no other lock.

-- The holder of a parked node's row: no worker's id (the nil uuid).
CREATE OR REPLACE FUNCTION kiln_parked_holder() RETURNS uuid LANGUAGE sql IMMUTABLE AS $$
  SELECT '00000000-0000-0000-0000-000000000000'::uuid
$$;

-- kiln_park_node: the worker that holds p_job's row parks the node.
-- p_park: { action, reason, until, wake_key, seen, before: {action, status,
-- status_reason}, inputs, in_progress_event }. `before` and `inputs` are kept
-- from the first park when a resumed node parks again (so are `since` and the
-- wait's own `until`, which the action passes back). The wait ends at the
-- traversal's deadline at the latest (an action's abort timer does the same).
-- Returns { outcome: parked | again | aborted | gone | lock_lost }; 'again': a
-- wake came after the action read the count, so it looks again now;
-- 'aborted' (with `reason`): the node was told to stop while its action ran
-- (kiln_abort_jobs), and a park would sleep through that.
CREATE OR REPLACE FUNCTION kiln_park_node(p_job bigint, p_worker uuid, p_park jsonb) RETURNS jsonb LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  j job%ROWTYPE;
  s stack%ROWTYPE;
  r resource%ROWTYPE;
  v_key text := p_park->>'wake_key';
  v_seq bigint;
  v_action text := p_park->>'action';
  v_until timestamptz;
  v_node jsonb;
  v_events jsonb[] := '{}';
BEGIN
  SELECT * INTO j FROM job WHERE id = p_job;
  IF NOT FOUND OR j.locked_by IS DISTINCT FROM p_worker THEN RETURN jsonb_build_object('outcome', 'gone'); END IF;
  SELECT * INTO s FROM stack WHERE id = j.stack_id FOR SHARE;
  -- Read again under the stack row: a stop notice (kiln_abort_jobs) is written by a
  -- transaction that holds the stack row alone, and may have committed while we waited for it.
  SELECT * INTO j FROM job WHERE id = p_job;
  SELECT * INTO r FROM resource WHERE id = j.resource_id FOR UPDATE;
  IF NOT FOUND OR r.engine_id IS DISTINCT FROM p_worker THEN
    DELETE FROM job WHERE id = p_job;
    RETURN jsonb_build_object('outcome', 'lock_lost');
  END IF;
  IF j.abort IS NOT NULL THEN RETURN jsonb_build_object('outcome', 'aborted', 'reason', j.abort); END IF;
  -- A failing traversal stops its parked nodes (kiln_maybe_finish_failed): one about to park stops now.
  IF s.current_traversal_id = j.traversal_id AND (SELECT failure_reason FROM traversal WHERE id = j.traversal_id) IS NOT NULL THEN
    RETURN jsonb_build_object('outcome', 'aborted', 'reason', 'the stack is failing: ' || (SELECT failure_reason FROM traversal WHERE id = j.traversal_id));
  END IF;
  IF v_key IS NOT NULL THEN
    INSERT INTO wake (key) VALUES (v_key) ON CONFLICT (key) DO NOTHING;
    SELECT seq INTO v_seq FROM wake WHERE key = v_key FOR UPDATE;
    IF v_seq <> coalesce((p_park->>'seen')::bigint, 0) THEN RETURN jsonb_build_object('outcome', 'again'); END IF;
  END IF;
  v_until := least((p_park->>'until')::timestamptz, (SELECT deadline FROM traversal WHERE id = j.traversal_id));
  v_node := jsonb_build_object('rid', coalesce(j.graph_key_id, j.resource_id), 'update', j.is_update);

  IF p_park ? 'in_progress_event' THEN
    -- An update not marked UPDATE_IN_PROGRESS yet (kiln_mark_in_progress): the history shows it now.
    v_events := v_events || kiln_in_progress_ev(j.traversal_id, r, v_action, coalesce(j.graph_key_id, j.resource_id), j.is_update);
  END IF;
  UPDATE resource SET engine_id = kiln_parked_holder(), lease_expires_at = NULL,
         action = v_action, status = 'IN_PROGRESS',
         status_reason = CASE WHEN action = v_action AND status = 'IN_PROGRESS' THEN status_reason ELSE 'state changed' END,
         atomic_key = atomic_key + 1, updated_at = now()
   WHERE id = r.id RETURNING * INTO r;
  -- (a re-park drops what woke the last park: `due`)
  UPDATE job SET locked_by = NULL, locked_at = NULL, parked_until = v_until, wake_key = v_key,
         park = jsonb_build_object(
           'since', coalesce(j.park->'since', to_jsonb(now())),
           'until', to_jsonb(v_until),
           'action', v_action,
           'reason', p_park->>'reason',
           'before', coalesce(j.park->'before', p_park->'before'),
           'inputs', coalesce(j.park->'inputs', p_park->'inputs', '[]'::jsonb))
   WHERE id = p_job;
  v_events := v_events || kiln_ev('node', j.traversal_id, r.id, r.name, r.physical_id, NULL, NULL,
    'parked: ' || coalesce(p_park->>'reason', 'waiting'),
    v_node || jsonb_build_object('state', 'RUNNING', 'lock', 'parked', 'parked', true, 'until', v_until, 'wake', v_key));
  PERFORM kiln_emit(s.id, to_jsonb(v_events));
  RETURN jsonb_build_object('outcome', 'parked', 'until', v_until);
END $$;

-- kiln_resume_node: the begin of a parked node's job (kiln_begin_core), before
-- any other check: whatever became of its traversal, the node holds its row,
-- and only running its action to an end lets the row go (a superseded
-- traversal's node then releases it and retriggers the newer node waiting for
-- it, as an action that ran on does). Takes the row's lock over from the park
-- for p_worker and answers what the worker needs to run the node: the row as
-- it was before the node began, the inputs it parked with, and `resumed`
-- (since, until, whether its time is up, and why it must stop if it must:
-- the job's `abort`). NULL when the row
-- is no longer held by this park (the lock was broken meanwhile): the job is
-- then an ordinary one. With p_nowait, 'later' when the row is busy.
CREATE OR REPLACE FUNCTION kiln_resume_node(j job, s stack, p_worker uuid, p_lease_ms int, p_nowait boolean) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  r resource%ROWTYPE;
  t traversal%ROWTYPE;
  v_key int := coalesce(j.graph_key_id, j.resource_id);
BEGIN
  IF p_nowait THEN
    SELECT * INTO r FROM resource WHERE id = j.resource_id FOR UPDATE SKIP LOCKED;
    IF NOT FOUND AND EXISTS (SELECT 1 FROM resource WHERE id = j.resource_id) THEN
      RETURN '{"result": {"outcome": "later"}, "events": []}'::jsonb;
    END IF;
  ELSE
    SELECT * INTO r FROM resource WHERE id = j.resource_id FOR UPDATE;
  END IF;
  IF r.id IS NULL OR r.engine_id IS DISTINCT FROM kiln_parked_holder() OR r.lock_traversal_id IS DISTINCT FROM j.traversal_id THEN
    UPDATE job SET park = NULL, parked_until = NULL, wake_key = NULL WHERE id = j.id;
    RETURN NULL;
  END IF;
  SELECT * INTO t FROM traversal WHERE id = j.traversal_id;
  -- The stop notice as of now (kiln_begin_core read the job before it locked the stack row).
  SELECT abort INTO j.abort FROM job WHERE id = j.id;
  UPDATE job SET parked_until = NULL, wake_key = NULL WHERE id = j.id AND (parked_until IS NOT NULL OR wake_key IS NOT NULL);
  UPDATE resource SET engine_id = p_worker, lease_expires_at = now() + p_lease_ms * interval '1 millisecond',
         atomic_key = atomic_key + 1, updated_at = now()
   WHERE id = r.id RETURNING * INTO r;
  RETURN jsonb_build_object(
    'result', kiln_locked_reply('locked', to_jsonb(r) || coalesce(j.park->'before', '{}'), s, t, v_key, j.is_update)
              || jsonb_build_object('inputs', coalesce(j.park->'inputs', '[]'::jsonb),
                                    'resumed', jsonb_build_object('since', j.park->'since', 'until', j.park->'until',
                                                                  'due', coalesce(j.park->'due', 'false'), 'abort', j.abort)),
    'events', jsonb_build_array(kiln_ev('node', t.id, r.id, r.name, r.physical_id, NULL, NULL,
      CASE WHEN j.abort IS NOT NULL THEN 'resumed to stop: ' || j.abort ELSE 'resumed' END,
      jsonb_build_object('rid', v_key, 'update', j.is_update, 'state', 'RUNNING', 'lock', 'acquired', 'worker', p_worker,
                         'lease_expires_at', r.lease_expires_at, 'resumed', true))));
END $$;

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

-- kiln_abort_jobs: the nodes a kiln_abort notice names (the same JSON:
-- stack_id, traversal_id, mode 'others' | 'this' | 'rows', rows, reason) are
-- told to stop, durably: the notice reaches only actions running in a worker
-- at that moment. Each node job in flight (claimed, or parked) keeps the
-- reason (`abort`): an action about to park answers it instead of parking
-- (kiln_park_node), and a parked node is woken to stop (its action starts
-- aborted when it resumes). Returns how many parked nodes were woken. Run in
-- the transaction that sends the notice, which holds the stack row
-- exclusively, so no node step of the stack is half-way meanwhile.
CREATE OR REPLACE FUNCTION kiln_abort_jobs(p_notice jsonb) RETURNS int LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  v_stack uuid := (p_notice->>'stack_id')::uuid;
  v_trav uuid := (p_notice->>'traversal_id')::uuid;
  v_mode text := p_notice->>'mode';
  v_rows int[] := ARRAY(SELECT jsonb_array_elements_text(coalesce(p_notice->'rows', '[]'))::int);
  v_reason text := coalesce(p_notice->>'reason', 'aborted');
  v_n int;
BEGIN
  -- One statement for both: a parked job a claim takes meanwhile is waited for and
  -- still matches once claimed (two statements, one per kind, let it slip between them).
  WITH stopped AS (
    UPDATE job SET abort = coalesce(abort, v_reason),
           parked_until = CASE WHEN locked_by IS NULL THEN NULL ELSE parked_until END,
           wake_key = CASE WHEN locked_by IS NULL THEN NULL ELSE wake_key END
     WHERE stack_id = v_stack AND kind = 'check_resource' AND (locked_by IS NOT NULL OR park IS NOT NULL)
       AND CASE v_mode
             WHEN 'this' THEN traversal_id = v_trav
             WHEN 'rows' THEN traversal_id IS DISTINCT FROM v_trav AND resource_id = ANY(v_rows)
             ELSE traversal_id IS DISTINCT FROM v_trav
           END
    RETURNING locked_by)
  SELECT count(*) FILTER (WHERE locked_by IS NULL) INTO v_n FROM stopped;
  IF v_n > 0 THEN PERFORM pg_notify('kiln_jobs', ''); END IF;
  RETURN v_n;
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
  INSERT INTO job (kind, stack_id, project_id, traversal_id, resource_id, is_update) VALUES ('check_resource', p_stack.id, p_stack.project_id, p_trav, p_rid, p_upd);
  SELECT name INTO v_name FROM resource WHERE id = p_rid;
  RETURN kiln_ev('node', p_trav, p_rid, v_name, NULL, NULL, NULL, 'retriggered: the older traversal released the lock',
                 jsonb_build_object('rid', p_rid, 'update', p_upd, 'state', 'READY', 'retriggered', true));
END $$;

-- When a failing traversal has nothing left in flight: stack FAILED, the rest
-- of its queue dropped, and (if the stack rolls back on failure) a rollback job.
-- Its parked nodes are in flight too: they are woken to stop (a failing
-- traversal schedules nothing new, and a parked node is waiting, not acting:
-- the stack settles now rather than when the longest wait ends), and the
-- settle that follows their finishes fails the stack.
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
  IF EXISTS (SELECT 1 FROM job WHERE stack_id = p_stack AND traversal_id = p_trav AND park IS NOT NULL) THEN
    PERFORM kiln_abort_jobs(jsonb_build_object('stack_id', p_stack, 'traversal_id', p_trav, 'mode', 'this',
                                                 'reason', 'the stack is failing: ' || t.failure_reason));
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
    INSERT INTO job (kind, stack_id, project_id, traversal_id) VALUES ('rollback', p_stack, s.project_id, p_trav);
    PERFORM pg_notify('kiln_jobs', '');
  END IF;
  RETURN true;
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
    secret_forms = v_row.secret_forms,
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
            INSERT INTO job (kind, stack_id, project_id, traversal_id, resource_id, is_update, locked_by, locked_at, attempts)
            VALUES ('check_resource', s.id, s.project_id, t.id, v_srid, v_supd,
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

-- lib/db/functions/40_replace_node.sql
-- kiln_replace_node: an update node found that its row must be replaced
-- (create-before-delete). In one transaction: insert the replacement row
-- (INIT, `replaces` = old), point the old row's `replaced_by` at it, release the
-- old row unchanged (it stays visible until its cleanup node deletes it), and
-- hand the node to a job for the new row. The new row *impersonates* the old
-- row's graph node: its successors and the stack hear from the node they wait for.
--
-- p_spec: { type, requires: [ids], reason, claim, begin_lease_ms, uuid }
-- uuid: the new row's, when the worker chose it (it starts a state-only
-- type's create under that identity while this call runs: check-resource.ts,
-- "head start"); otherwise a fresh one.
-- With claim and begin_lease_ms the new row is also begun (locked, RUNNING) in
-- this transaction, as kiln_finish_node does for a successor.
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
  IF r.engine_id IS DISTINCT FROM p_worker THEN
    DELETE FROM job WHERE id = p_job;
    RETURN jsonb_build_object('outcome', 'lock_lost');
  END IF;
  v_key := coalesce(j.graph_key_id, j.resource_id);
  v_waiter_trav := r.waiter_traversal_id;
  v_waiter_upd := r.waiter_is_update;
  UPDATE resource SET engine_id = NULL, lock_traversal_id = NULL, lease_expires_at = NULL,
         waiter_traversal_id = NULL, waiter_is_update = NULL, atomic_key = atomic_key + 1, updated_at = now()
   WHERE id = r.id;
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
  INSERT INTO job (kind, stack_id, project_id, traversal_id, resource_id, is_update, graph_key_id, locked_by, locked_at, attempts)
  VALUES ('check_resource', s.id, s.project_id, t.id, v_new.id, true, v_key,
          CASE WHEN v_claim THEN p_worker END, CASE WHEN v_claim THEN now() END, CASE WHEN v_claim THEN 1 ELSE 0 END)
  RETURNING * INTO v_job;
  v_events := v_events || kiln_ev('node', t.id, r.id, r.name, r.physical_id, NULL, NULL,
    'replaced: ' || coalesce(p_spec->>'reason', 'replacement required'),
    jsonb_build_object('rid', v_key, 'update', true, 'state', 'READY', 'replaced_by', v_new.id, 'lock', 'released'));
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

-- lib/db/functions/50_sweep.sql
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
  v_abort jsonb;
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
      v_abort := jsonb_build_object('stack_id', s.id, 'traversal_id', t.id, 'mode', 'this', 'reason', 'timed out');
      PERFORM pg_notify('kiln_abort', v_abort::text);
      PERFORM kiln_abort_jobs(v_abort);
    END IF;
    -- d. lost messages (only when the traversal is still scheduling)
    IF t.failure_reason IS NULL THEN
      FOR sp IN SELECT * FROM kiln_lost_nodes(t.id) LOOP
        UPDATE sync_point SET state = 'READY', updated_at = now()
         WHERE traversal_id = sp.traversal_id AND resource_id = sp.resource_id AND is_update = sp.is_update;
        INSERT INTO job (kind, stack_id, project_id, traversal_id, resource_id, is_update, graph_key_id)
        VALUES ('check_resource', s.id, s.project_id, t.id, coalesce(sp.actor_id, sp.resource_id), sp.is_update,
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

-- lib/db/functions/(removed)
DROP INDEX IF EXISTS job_available_idx;
