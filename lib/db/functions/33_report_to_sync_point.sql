-- kiln_report_to_sync_point: one report into one successor's sync point
-- (kiln_finish_node, step 4): the sender's input, then the count; the report
-- that completes the node's set makes it READY.
--
-- A report's sync_input row makes it count once (a node run twice, Heat's
-- duplicate triggers, reports twice). A no-op cleanup node completed inline
-- (kiln_complete_noop_cleanup) cannot report twice: it was completed under
-- its sync point's lock, in the transaction that made it READY, and is DONE
-- from then on. Its reports (always to cleanup nodes: no payload) write no
-- row (p_input false). With the skipped rewrite of last_traversal_id there,
-- the tail an in-place update's last finish completes (55 no-op cleanups of
-- layered-100, stepped alone) went from 12.1 to 9.0 ms.
--
-- Takes: the traversal; the successor's key (p_rid, p_upd); the sender's
--   (p_sender, p_sender_upd); the payload (an update node's inputs; NULL for
--   a cleanup node); whether to write the input row.
-- Returns: the sync point as the report left it; NULL when the report did
--   not count (a duplicate) or the node has no sync point.
-- Assumes locked: the successor's sync point.
-- Writes: one sync_input row (p_input), the sync point (satisfied, state).
CREATE OR REPLACE FUNCTION kiln_report_to_sync_point(p_trav uuid, p_rid int, p_upd boolean, p_sender int, p_sender_upd boolean, p_payload jsonb, p_input boolean)
RETURNS sync_point LANGUAGE plpgsql AS $$
DECLARE
  v_sp sync_point%ROWTYPE;
BEGIN
  IF p_input THEN
    INSERT INTO sync_input (traversal_id, resource_id, is_update, sender_id, sender_is_update, payload)
    VALUES (p_trav, p_rid, p_upd, p_sender, p_sender_upd, p_payload)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN RETURN NULL; END IF;
  END IF;
  UPDATE sync_point SET satisfied = satisfied + 1,
         state = CASE WHEN satisfied + 1 >= required AND state = 'WAITING' THEN 'READY' ELSE state END,
         updated_at = now()
   WHERE traversal_id = p_trav AND resource_id = p_rid AND is_update = p_upd
   RETURNING * INTO v_sp;
  IF NOT FOUND THEN RETURN NULL; END IF;
  RETURN v_sp;
END $$;
