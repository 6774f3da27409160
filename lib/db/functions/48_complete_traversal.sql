-- kiln_complete_traversal: the last root reported (kiln_settle), or a
-- traversal with no nodes at all started (kiln_open_traversal): the stack is
-- COMPLETE. Rows deleted by this (or an earlier) traversal are purged; a
-- DELETE traversal soft-deletes the stack. The caller holds the stack row
-- alone (FOR NO KEY UPDATE).
CREATE OR REPLACE FUNCTION kiln_complete_traversal(p_stack uuid, p_trav uuid) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  t traversal%ROWTYPE;
  s stack%ROWTYPE;
  v_reason text;
BEGIN
  SELECT * INTO t FROM traversal WHERE id = p_trav;
  v_reason := 'Stack ' || t.action || ' completed successfully';
  UPDATE stack SET status = 'COMPLETE', status_reason = v_reason,
         last_good_template_id = CASE WHEN t.action IN ('DELETE', 'CHECK', 'DRIFT') THEN last_good_template_id ELSE t.raw_template_id END,
         deleted_at = CASE WHEN t.action = 'DELETE' THEN now() ELSE deleted_at END
   WHERE id = p_stack AND current_traversal_id = p_trav AND status = 'IN_PROGRESS' RETURNING * INTO s;
  IF NOT FOUND THEN RETURN; END IF;
  UPDATE traversal SET outcome = 'COMPLETE', outcome_reason = v_reason, ended_at = now() WHERE id = p_trav;
  PERFORM kiln_emit(p_stack, jsonb_build_array(kiln_ev('stack', p_trav, NULL, NULL, NULL, s.action, 'COMPLETE', v_reason, NULL)));
  PERFORM kiln_notify_settled(p_stack, p_trav, s.action, 'COMPLETE');
  DELETE FROM resource WHERE stack_id = p_stack AND action = 'DELETE' AND status = 'COMPLETE' AND engine_id IS NULL;
  DELETE FROM sync_input WHERE traversal_id = p_trav;
  DELETE FROM sync_point WHERE traversal_id = p_trav;
END $$;
