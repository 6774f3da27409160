-- kiln_predicted_action: the action a node takes on p_row when that is known
-- before the node runs: CREATE for a row never created, DELETE for a live row
-- a cleanup node removes, CHECK in a check. NULL when only the node can tell
-- (an update node: in place, replace or nothing) and when there is nothing to
-- do (a drift check only looks; a cleanup node whose row is at the
-- traversal's template or already deleted: decideCleanup's no-op). A begin
-- marks the row `<action>_IN_PROGRESS` with it at once (kiln_lock_node_row);
-- a finish completes a cleanup node it predicts nothing for without a worker
-- (kiln_complete_noop_cleanup). Reads no table.
CREATE OR REPLACE FUNCTION kiln_predicted_action(p_row resource, p_is_update boolean, p_template uuid, p_stack_action text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN p_stack_action = 'CHECK' THEN 'CHECK'
    -- a drift check only looks: the row keeps its action and status
    WHEN p_stack_action = 'DRIFT' THEN NULL
    -- creating: a new row, or one whose create never completed (retried in place: idempotent physical names)
    WHEN p_is_update THEN CASE WHEN p_row.action = 'INIT' OR (p_row.action = 'CREATE' AND p_row.status = 'FAILED' AND p_row.properties IS NULL) THEN 'CREATE' END
    WHEN p_row.current_template_id IS DISTINCT FROM p_template AND NOT (p_row.action = 'DELETE' AND p_row.status = 'COMPLETE') THEN 'DELETE'
  END
$$;
