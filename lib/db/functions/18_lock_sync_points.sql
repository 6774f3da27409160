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
