-- kiln_finish_mark_node: step 3 of kiln_finish_node, for a node of the
-- stack's current traversal: its own sync point records how it ended. DONE
-- (its actor: the row that did the work, a replacement when one
-- impersonates the node), or FAILED, and then the traversal is failing: its
-- first failure is kept (failure_reason), nothing new starts, and
-- kiln_settle fails the stack once nothing is in flight.
--
-- Takes: the traversal and its action, the node's key and is_update, the
--   actor's row id, whether the action succeeded, and the reason it gave.
-- Returns: the stack's 'failing' event when this failure is the traversal's
--   first; otherwise NULL.
-- Assumes locked: the node's sync point (kiln_lock_sync_points). The
--   traversal row comes last in the lock order (4): a failure takes it here.
-- Writes: the sync point; on a first failure, traversal.failure_reason.
CREATE OR REPLACE FUNCTION kiln_finish_mark_node(p_trav uuid, p_action text, p_key int, p_upd boolean, p_actor int, p_ok boolean, p_reason text) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  IF p_ok THEN
    UPDATE sync_point SET state = 'DONE', actor_id = p_actor, updated_at = now()
     WHERE traversal_id = p_trav AND resource_id = p_key AND is_update = p_upd;
    RETURN NULL;
  END IF;
  UPDATE sync_point SET state = 'FAILED', updated_at = now()
   WHERE traversal_id = p_trav AND resource_id = p_key AND is_update = p_upd;
  UPDATE traversal SET failure_reason = coalesce(p_reason, 'resource failed') WHERE id = p_trav AND failure_reason IS NULL;
  IF NOT FOUND THEN RETURN NULL; END IF;
  RETURN kiln_ev('stack', p_trav, NULL, NULL, NULL, p_action, 'IN_PROGRESS',
    'failing: ' || coalesce(p_reason, 'resource failed'), jsonb_build_object('failing', true));
END $$;
