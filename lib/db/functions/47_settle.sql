-- kiln_settle: after a node step reported that its traversal may have ended
-- (the last root done, or a failure), decide the stack's status — alone on the
-- stack row. Idempotent; the sweeper calls it too for a caller that died.
CREATE OR REPLACE FUNCTION kiln_settle(p_stack uuid, p_trav uuid) RETURNS text LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  s stack%ROWTYPE;
  t traversal%ROWTYPE;
BEGIN
  SELECT * INTO s FROM stack WHERE id = p_stack FOR NO KEY UPDATE;
  IF NOT FOUND OR s.current_traversal_id IS DISTINCT FROM p_trav THEN RETURN 'stale'; END IF;
  SELECT * INTO t FROM traversal WHERE id = p_trav;
  IF t.outcome IS NOT NULL THEN RETURN t.outcome; END IF;
  IF t.failure_reason IS NOT NULL THEN
    RETURN CASE WHEN kiln_maybe_finish_failed(p_stack, p_trav) THEN 'FAILED' ELSE 'failing' END;
  END IF;
  IF t.roots_pending <= 0 THEN
    PERFORM kiln_complete_traversal(p_stack, p_trav);
    RETURN 'COMPLETE';
  END IF;
  RETURN 'running';
END $$;

-- kiln_maybe_finish_failed (kiln_settle's): when a failing traversal has
-- nothing left in flight: stack FAILED, the rest of its queue dropped, and (if
-- the stack rolls back on failure) a rollback job. Its parked nodes are in
-- flight too: they are woken to stop (a failing traversal schedules nothing
-- new, and a parked node is waiting, not acting: the stack settles now rather
-- than when the longest wait ends), and the settle that follows their
-- finishes fails the stack.
CREATE OR REPLACE FUNCTION kiln_maybe_finish_failed(p_stack uuid, p_trav uuid) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  t traversal%ROWTYPE;
  s stack%ROWTYPE;
  v_reason text;
BEGIN
  SELECT * INTO t FROM traversal WHERE id = p_trav;
  IF t.outcome IS NOT NULL OR t.failure_reason IS NULL THEN RETURN false; END IF;
  IF EXISTS (SELECT 1 FROM job WHERE traversal_id = p_trav AND kind = 'check_resource' AND locked_by IS NOT NULL) THEN
    RETURN false;
  END IF;
  IF EXISTS (SELECT 1 FROM job WHERE stack_id = p_stack AND traversal_id = p_trav AND park IS NOT NULL) THEN
    PERFORM kiln_abort_jobs(jsonb_build_object('stack_id', p_stack, 'traversal_id', p_trav, 'mode', 'this',
                                                 'reason', 'the stack is failing: ' || t.failure_reason));
    RETURN false;
  END IF;
  v_reason := t.failure_reason;
  UPDATE stack SET status = 'FAILED', status_reason = v_reason
   WHERE id = p_stack AND current_traversal_id = p_trav AND status = 'IN_PROGRESS' RETURNING * INTO s;
  IF NOT FOUND THEN RETURN false; END IF;
  UPDATE traversal SET outcome = 'FAILED', outcome_reason = v_reason, ended_at = now() WHERE id = p_trav;
  DELETE FROM job WHERE traversal_id = p_trav AND kind = 'check_resource';
  UPDATE sync_point SET state = 'SKIPPED', updated_at = now() WHERE traversal_id = p_trav AND state IN ('WAITING', 'READY', 'BLOCKED');
  PERFORM kiln_emit(p_stack, jsonb_build_array(kiln_ev('stack', p_trav, NULL, NULL, NULL, s.action, 'FAILED', v_reason, NULL)));
  PERFORM kiln_notify_settled(p_stack, p_trav, s.action, 'FAILED');
  IF NOT s.disable_rollback AND t.action IN ('CREATE', 'UPDATE') THEN
    INSERT INTO job (kind, stack_id, project_id, traversal_id) VALUES ('rollback', p_stack, s.project_id, p_trav);
    PERFORM pg_notify('kiln_jobs', '');
  END IF;
  RETURN true;
END $$;
