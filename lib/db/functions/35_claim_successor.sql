-- kiln_claim_successor: a report made a successor READY (kiln_finish_node,
-- step 4): its job is inserted, and the worker
-- continues with it (no queue hop) while it has room. It is begun here when
-- nothing stands in the way (the common case: a free row, time left): its
-- row taken SKIP LOCKED (resource rows come before sync points in the lock
-- order; we hold its sync point) and locked for the worker
-- (kiln_lock_node_row). One claimed node whose row is busy, or whose
-- traversal is out of time, is held instead: the finish begins it after its
-- other steps with kiln_begin_core, which decides (blocked, a broken lease, a
-- time-out) without waiting. Anything else is queued for any worker.
--
-- Takes: the stack and traversal rows; the successor's sync point (READY,
--   every input in); the worker; the lease of a begin (p_begin_ms; NULL:
--   claim nothing); whether the worker has room (p_room); whether the finish
--   may still hold one (p_may_hold: it holds none yet).
-- Returns: outcome 'begun' (job, begun: the lock's reply, event: its
--   RUNNING event, row_type: for lazy commits), 'claimed' (job: held for
--   kiln_begin_core) or 'queued' (nothing else: its job waits for a claim).
-- Assumes locked: the stack row (shared) and the successor's sync point.
-- Writes: the job; when begun, the row and the sync point (RUNNING).
CREATE OR REPLACE FUNCTION kiln_claim_successor(s stack, t traversal, p_sp sync_point, p_worker uuid, p_begin_ms int, p_room boolean, p_may_hold boolean,
  OUT outcome text, OUT job jsonb, OUT begun jsonb, OUT event jsonb, OUT row_type text
) LANGUAGE plpgsql AS $$
DECLARE
  v_srid int := p_sp.resource_id;
  v_supd boolean := p_sp.is_update;
  v_row resource%ROWTYPE;
  v_free boolean := false;
  v_mine boolean;
  v_new job%ROWTYPE;
  v_lock jsonb;
BEGIN
  IF p_room AND p_begin_ms IS NOT NULL AND t.deadline >= now() THEN
    SELECT * INTO v_row FROM resource WHERE id = v_srid FOR UPDATE SKIP LOCKED;
    v_free := FOUND AND v_row.engine_id IS NULL;
  END IF;
  v_mine := v_free OR (p_room AND p_may_hold);
  INSERT INTO job (kind, stack_id, project_id, traversal_id, resource_id, is_update, locked_by, locked_at, attempts)
  VALUES ('check_resource', s.id, s.project_id, t.id, v_srid, v_supd,
          CASE WHEN v_mine THEN p_worker END, CASE WHEN v_mine THEN now() END, CASE WHEN v_mine THEN 1 ELSE 0 END)
  RETURNING * INTO v_new;
  IF v_free THEN
    v_lock := kiln_lock_node_row(v_row, s, t, v_srid, v_supd, p_sp, p_worker, p_begin_ms);
    outcome := 'begun';
    job := to_jsonb(v_new);
    begun := v_lock->'result';
    event := v_lock->'events'->0; -- kiln_lock_node_row writes one event
    row_type := v_row.type;
  ELSIF v_mine THEN
    outcome := 'claimed';
    job := to_jsonb(v_new);
  ELSE
    outcome := 'queued';
  END IF;
END $$;
