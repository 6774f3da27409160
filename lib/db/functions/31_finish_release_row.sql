-- kiln_finish_release_row: step 1 of kiln_finish_node. The node's row takes
-- the state its action left and lets go of its lock: p_result.set
-- ({column: value, …}) is laid over the row, the lock and the waiter are
-- cleared, atomic_key goes up. The node's job is deleted. A cleanup that
-- deleted a replaced row (p_result.deleted) also clears `replaces` on the
-- replacement made for its traversal's template.
--
-- Takes: the row as the worker locked it, the node's job (held by the
--   worker) and its traversal, the stack's id, the finish's p_result.
-- Returns: the row as released. (The waiter it had is the caller's to
--   retrigger: kiln_retrigger_waiter.)
-- Assumes locked: the stack row (shared) and p_row (FOR UPDATE, its lock
--   ours). A deleted row's replacement comes next in the lock order (2): a
--   batch has locked it up front; a lone finish takes it here.
-- Writes: the row; the job (deleted); `replaces` of the replacement.
CREATE OR REPLACE FUNCTION kiln_finish_release_row(p_row resource, p_job bigint, p_trav uuid, p_stack uuid, p_result jsonb) RETURNS resource LANGUAGE plpgsql AS $$
DECLARE
  v_set jsonb := coalesce(p_result->'set', '{}');
  -- The keys of `set` are column names: jsonb_populate_record lays them over
  -- the row in one call (a JSON array becomes int[], a string a uuid).
  v_row resource%ROWTYPE := jsonb_populate_record(p_row, v_set);
  r resource%ROWTYPE;
BEGIN
  UPDATE resource SET
    action = v_row.action, status = v_row.status, status_reason = v_row.status_reason, type = v_row.type,
    physical_id = v_row.physical_id, properties = v_row.properties, attributes = v_row.attributes, data = v_row.data,
    secret_forms = v_row.secret_forms,
    -- a stored result replaces the intent written before the action (kiln_record_intent)
    pending_properties = CASE WHEN v_set ? 'properties' THEN NULL ELSE pending_properties END,
    requires = v_row.requires, current_template_id = v_row.current_template_id, deletion_policy = v_row.deletion_policy,
    replaced_by = CASE WHEN v_set->>'clear_replaced_by' = 'true' THEN NULL ELSE replaced_by END,
    engine_id = NULL, lock_traversal_id = NULL, lease_expires_at = NULL,
    waiter_traversal_id = NULL, waiter_is_update = NULL,
    atomic_key = atomic_key + 1, updated_at = now()
  WHERE id = p_row.id RETURNING * INTO r;
  DELETE FROM job WHERE id = p_job;

  IF coalesce((p_result->>'deleted')::boolean, false) THEN
    -- The replaced row is gone: its replacement no longer replaces anything (Heat's _update_replacement_data).
    UPDATE resource SET replaces = NULL
     WHERE replaces = p_row.id AND stack_id = p_stack
       AND current_template_id = (SELECT raw_template_id FROM traversal WHERE id = p_trav);
  END IF;
  RETURN r;
END $$;
