-- kiln_sweep_candidates: the stacks a sweep has something to do for (50_sweep.sql,
-- a-e): an expired lock, a job claimed by a dead worker, a traversal past its
-- deadline, failing or with its last root reported but not settled, or a
-- lost node.
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
