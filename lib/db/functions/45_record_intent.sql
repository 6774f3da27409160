-- kiln_record_intent: before a create with effects outside Kiln runs, the
-- properties it is about to use (resource.pending_properties), so that the
-- cleanup of a row whose worker died mid-create can find what it made. False
-- when the lock is no longer ours (the action must not run).
CREATE OR REPLACE FUNCTION kiln_record_intent(p_job bigint, p_worker uuid, p_properties jsonb, p_requires int[]) RETURNS boolean LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_rid int;
BEGIN
  SELECT resource_id INTO v_rid FROM job WHERE id = p_job AND locked_by = p_worker;
  IF NOT FOUND THEN RETURN false; END IF;
  -- `requires` too, as Heat's create_convergence stores it before it creates: a
  -- traversal planned while this create runs (a rollback, a delete) cleans the
  -- row up before the rows it is being made from.
  UPDATE resource SET pending_properties = p_properties, requires = p_requires, updated_at = now()
   WHERE id = v_rid AND engine_id = p_worker;
  IF NOT FOUND THEN
    -- Our lease ran out and the lock was broken; whoever broke it re-runs the node (as in kiln_finish_node).
    DELETE FROM job WHERE id = p_job;
    RETURN false;
  END IF;
  RETURN true;
END $$;
