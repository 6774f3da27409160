-- kiln_lock_batch: a batch's first locks (kiln_finish_nodes,
-- kiln_replace_nodes), in the lock order (10_events.sql): its jobs' stack
-- rows shared (1), then their resource rows and p_more_rows (2), each set in
-- id order. One probe per key (42_batch_jobs.sql says why).
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
