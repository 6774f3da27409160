-- A batch of node steps (kiln_finish_nodes, kiln_replace_nodes) finds its
-- jobs, stacks and rows by key, one probe per key: a LATERAL subquery with a
-- lock or OFFSET 0 is never flattened into a join. Written as joins
-- (`id IN (SELECT … WHERE id = ANY(…))`), the cached generic plans made from
-- statistics an ANALYZE took mid-traversal walked the whole resource primary
-- key per batch (a merge join: every row of every stack), hashed every claimed
-- job of the database and scanned every locked row (test/db/plans.test.ts).

-- kiln_batch_jobs: the jobs p_ids names that p_worker holds, in the order of p_ids. The holder
-- is checked outside the probe: inside it, a plan once searched the worker's
-- jobs (the locked_by index) for each id, the whole batch per job.
CREATE OR REPLACE FUNCTION kiln_batch_jobs(p_ids bigint[], p_worker uuid) RETURNS job[] LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN ARRAY(SELECT z.j FROM unnest(p_ids) WITH ORDINALITY AS k(id, n)
                CROSS JOIN LATERAL (SELECT j FROM job j WHERE j.id = k.id OFFSET 0) z
               WHERE (z.j).locked_by = p_worker
               ORDER BY k.n);
END $$;
