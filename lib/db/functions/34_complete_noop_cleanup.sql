-- kiln_complete_noop_cleanup: a cleanup node with nothing to do is completed
-- in the finish whose report reaches it (kiln_finish_node, step 4), as the
-- worker would complete it (no lock, no action), in two cases:
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
-- way (it is not completed here). A node completed early still has inputs to
-- come: each is an obligation added to the traversal's roots_pending now and
-- paid when the input reports (a report into a DONE node), so the count
-- reaches 0 only when every node has reported, as before.
--
-- Takes: the traversal (its id, template and action); the node's sync point
--   as the report left it (its key, successors and counts: a cleanup node's
--   is_update is false); for an early completion the node's row (the
--   finishing node's own, released and still locked by this transaction),
--   else NULL (the row is taken here, SKIP LOCKED); the sender's name (for
--   the event). Scalars rather than the traversal and sync point rows: each
--   row passed is copied into the callee, and this runs once per cleanup
--   node of an update.
-- Returns: completed (false: nothing was done, and nothing written); when
--   completed, its event, the successors it still reports to (open_rids[i],
--   open_upds[i]), what it adds to roots_pending's countdown (roots: 1 for a
--   root, 1 per successor already DONE, less each input still to come), and
--   the row's name (sender_name, for those reports).
-- Assumes locked: the node's sync point. Its row (unless early) and its
--   successors' sync points are taken SKIP LOCKED: the caller already holds
--   later locks of the lock order.
-- Writes: the node's sync point (DONE), its row's last_traversal_id (unless
--   already set: a row updated in place was marked when its update began).
CREATE OR REPLACE FUNCTION kiln_complete_noop_cleanup(
  p_trav uuid, p_template uuid, p_action text, p_rid int, p_successors jsonb, p_satisfied int, p_required int, p_row resource, p_from text,
  OUT completed boolean, OUT event jsonb, OUT open_rids int[], OUT open_upds boolean[], OUT roots int, OUT sender_name text
) LANGUAGE plpgsql AS $$
DECLARE
  v_early boolean := p_row.id IS NOT NULL;
  v_free boolean;
  v_got int;
BEGIN
  completed := false;
  IF NOT v_early THEN
    -- Not early: the row is read into p_row, and taken SKIP LOCKED.
    SELECT * INTO p_row FROM resource WHERE id = p_rid FOR UPDATE SKIP LOCKED;
    -- No predicted action for a cleanup node is decideCleanup's no-op (a CHECK predicts CHECK).
    v_free := FOUND AND p_row.engine_id IS NULL AND kiln_predicted_action(p_row, false, p_template, p_action) IS NULL;
    IF NOT v_free THEN RETURN; END IF;
  END IF;
  -- Each successor by key (a scalar subquery, a LATERAL with a lock): as
  -- a join, the generic plan reads every sync point of the traversal and
  -- hashes them, per node (O(N²) for the tail; test/db/plans.test.ts).
  SELECT coalesce(array_agg(k.rid) FILTER (WHERE NOT k.done), '{}'), coalesce(array_agg(k.upd) FILTER (WHERE NOT k.done), '{}')
    INTO open_rids, open_upds
    FROM (SELECT (x->>0)::int AS rid, (x->>1)::boolean AS upd,
                 coalesce((SELECT sp.state = 'DONE' FROM sync_point sp
                            WHERE sp.traversal_id = p_trav AND sp.resource_id = (x->>0)::int AND sp.is_update = (x->>1)::boolean), false) AS done
            FROM jsonb_array_elements(p_successors) x OFFSET 0) k; -- OFFSET 0: one lookup per successor, not one per use of `done`
  IF cardinality(open_rids) > 0 THEN
    SELECT count(*) = cardinality(open_rids) INTO v_free
      FROM unnest(open_rids, open_upds) AS k(rid, upd)
     CROSS JOIN LATERAL (SELECT 1 FROM sync_point sp
                          WHERE sp.traversal_id = p_trav AND sp.resource_id = k.rid AND sp.is_update = k.upd
                            FOR UPDATE SKIP LOCKED) z;
    IF NOT v_free THEN RETURN; END IF;
  END IF;
  UPDATE sync_point SET state = 'DONE', actor_id = p_rid, updated_at = now()
   WHERE traversal_id = p_trav AND resource_id = p_rid AND is_update = false;
  -- A row updated in place was marked when its update node began.
  IF p_row.last_traversal_id IS DISTINCT FROM p_trav THEN
    UPDATE resource SET last_traversal_id = p_trav WHERE id = p_rid;
  END IF;
  event := kiln_ev('node', p_trav, p_rid, p_row.name, NULL, NULL, NULL,
    CASE WHEN p_row.current_template_id = p_template THEN 'already at the traversal template' ELSE 'already deleted' END,
    jsonb_build_object('rid', p_rid, 'update', false, 'state', 'DONE', 'satisfied', p_satisfied,
                       'required', p_required, 'from', p_from, 'inline', true)
    || CASE WHEN v_early THEN jsonb_build_object('early', true) ELSE '{}' END);
  v_got := jsonb_array_length(p_successors);
  -- roots_pending: a root done, a report to each DONE successor paid, the inputs still to come owed.
  roots := CASE WHEN v_got = 0 THEN 1 ELSE 0 END + (v_got - cardinality(open_rids)) - (p_required - p_satisfied);
  sender_name := p_row.name;
  completed := true;
END $$;
