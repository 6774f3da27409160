-- kiln_mark_in_progress: an in-place update is about to start: show UPDATE_IN_PROGRESS (creates and
-- deletes are recorded when the lock is taken; updates only once we know the
-- node really changes something). Lazily for a row of a state-only type
-- (p_lazy_types, 05_commit_lazily.sql), as every other step on such a row: this mark
-- used to wait for the disk while it held the stack's event lock, and a
-- layer's marks queued on each other there.
CREATE OR REPLACE FUNCTION kiln_mark_in_progress(p_job bigint, p_worker uuid, p_action text, p_lazy_types jsonb) RETURNS boolean LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  j job%ROWTYPE;
  r resource%ROWTYPE;
BEGIN
  SELECT * INTO j FROM job WHERE id = p_job;
  IF NOT FOUND OR j.locked_by IS DISTINCT FROM p_worker THEN RETURN false; END IF;
  PERFORM 1 FROM stack WHERE id = j.stack_id FOR SHARE;
  UPDATE resource SET action = p_action, status = 'IN_PROGRESS', status_reason = 'state changed',
         atomic_key = atomic_key + 1, updated_at = now()
   WHERE id = j.resource_id AND engine_id = p_worker RETURNING * INTO r;
  IF NOT FOUND THEN RETURN false; END IF;
  IF p_lazy_types ? r.type THEN PERFORM kiln_commit_lazily(); END IF;
  PERFORM kiln_emit(j.stack_id, jsonb_build_array(kiln_in_progress_ev(j.traversal_id, r, p_action, coalesce(j.graph_key_id, r.id), j.is_update)));
  RETURN true;
END $$;
