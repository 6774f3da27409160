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
-- it claimed nothing but node jobs (05_commit_lazily.sql).
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
