-- kiln_lost_nodes: a node that should have a message and has none: READY without a job, or
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
