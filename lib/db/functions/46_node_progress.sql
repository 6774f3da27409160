-- kiln_node_progress: progress reported by a resource action (throttled by
-- the worker), as a `progress` event of the node.
CREATE OR REPLACE FUNCTION kiln_node_progress(p_job bigint, p_worker uuid, p_message text, p_fraction double precision) RETURNS void LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  j job%ROWTYPE;
  r resource%ROWTYPE;
BEGIN
  SELECT * INTO j FROM job WHERE id = p_job;
  IF NOT FOUND OR j.locked_by IS DISTINCT FROM p_worker THEN RETURN; END IF;
  PERFORM 1 FROM stack WHERE id = j.stack_id FOR SHARE;
  SELECT * INTO r FROM resource WHERE id = j.resource_id;
  PERFORM kiln_emit(j.stack_id, jsonb_build_array(kiln_ev('progress', j.traversal_id, r.id, r.name, r.physical_id, NULL, NULL, p_message,
    jsonb_build_object('rid', coalesce(j.graph_key_id, r.id), 'update', j.is_update, 'fraction', p_fraction))));
END $$;
