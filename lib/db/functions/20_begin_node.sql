-- kiln_begin_node: a worker that claimed a check_resource job asks to work on
-- its node. One round trip, one transaction (lock order: 10_events.sql):
--
--   0. a parked node's job resumes it (25_park.sql)                 -> 'locked'
--   1. the job's traversal must still be the stack's current one   -> else 'stale'
--   2. the node must be READY (not already taken or done)           -> else 'duplicate'
--   3. the traversal must not have failed or timed out              -> else 'skipped'
--   4. the resource row must be unlocked:
--        lease of the holder ran out -> break its lock (row FAILED), go on
--        held by a live worker      -> register as the row's waiter, 'blocked'
--                                      (the holder retriggers us when it lets go;
--                                      a delete too: see below)
--   5. lock it (engine_id, lease, atomic_key+1), node RUNNING        -> 'locked'
--
-- Terminal outcomes delete the job; 'locked' keeps it until kiln_finish_node.
--
-- kiln_begin_core does the work without emitting, so that a finish, a
-- replacement or a claim can begin a node in its own transaction and publish
-- everything once. With p_nowait it never waits for a lock (the caller
-- already holds later locks of the lock order): whatever would wait answers
-- 'later', changes nothing, and the job stays claimed for a plain begin.
-- It returns { result, events, settle } where settle names a traversal that
-- may have ended (kiln_settle, run by the caller after commit).

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

-- The status a row is left in when the lock of a worker that died is broken.
-- It can no longer be trusted (the action may have half happened): FAILED. A
-- row already deleted stays deleted: its holder (a cleanup with nothing left
-- to do, an update node that replaces it) cannot have changed anything, and a
-- DELETE_FAILED row would be a live resource again that no node of the
-- current traversal, planned while the row was gone, would clean up.
CREATE OR REPLACE FUNCTION kiln_status_after_dead_holder(p_row resource) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_row.action = 'DELETE' AND p_row.status = 'COMPLETE' THEN 'COMPLETE' ELSE 'FAILED' END
$$;

-- Break the lock of a worker that stopped heartbeating (p_row: the row as it
-- was, locked FOR UPDATE by the caller); returns the event. The sweeper also
-- clears the waiter, which it retriggers itself; a begin that breaks the lock
-- leaves it, for its own finish to retrigger.
CREATE OR REPLACE FUNCTION kiln_break_dead_lock(p_row resource, p_clear_waiter boolean) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_status text := kiln_status_after_dead_holder(p_row);
BEGIN
  UPDATE resource SET engine_id = NULL, lock_traversal_id = NULL, lease_expires_at = NULL,
         waiter_traversal_id = CASE WHEN p_clear_waiter THEN NULL ELSE waiter_traversal_id END,
         waiter_is_update = CASE WHEN p_clear_waiter THEN NULL ELSE waiter_is_update END,
         status = v_status,
         status_reason = CASE WHEN v_status = 'FAILED' THEN 'Worker went down during resource ' || p_row.action ELSE status_reason END,
         atomic_key = atomic_key + 1, updated_at = now()
   WHERE id = p_row.id;
  RETURN kiln_ev('lock', p_row.lock_traversal_id, p_row.id, p_row.name, p_row.physical_id, p_row.action, v_status,
                 'Worker went down during resource ' || p_row.action, jsonb_build_object('lock', 'broken', 'worker', p_row.engine_id));
END $$;

-- PL/pgSQL rather than SQL for the helpers of a node step: PostgreSQL runs a
-- SQL function it cannot inline (an aggregate, a subquery) through a fresh
-- executor on every call, measured at ~60 µs more than the same body here.
CREATE OR REPLACE FUNCTION kiln_node_inputs(p_traversal uuid, p_rid int, p_is_update boolean) RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (SELECT coalesce(jsonb_agg(payload ORDER BY sender_id, sender_is_update) FILTER (WHERE payload IS NOT NULL), '[]'::jsonb)
            FROM sync_input WHERE traversal_id = p_traversal AND resource_id = p_rid AND is_update = p_is_update);
END $$;

-- Lock sync points of one traversal in the one global order (resource,
-- is_update): the keys are p_rids[i], p_upds[i]; null resource ids are ignored.
-- One primary-key probe per key: a single `IN (…) ORDER BY … FOR UPDATE` is
-- planned as a hash join over the whole table, one scan per finish (O(N²) for
-- a 10,000-node traversal). The LATERAL probe runs once per key, in the keys'
-- order (the sorted subquery is the outer side of the nested loop it forces).
-- Every node step locks only sync points of the stack's current traversal.
CREATE OR REPLACE FUNCTION kiln_lock_sync_points(p_trav uuid, p_rids int[], p_upds boolean[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1
     FROM (SELECT DISTINCT k.rid, k.upd FROM unnest(p_rids, p_upds) AS k(rid, upd) WHERE k.rid IS NOT NULL ORDER BY 1, 2) k
    CROSS JOIN LATERAL (SELECT 1 FROM sync_point sp
                         WHERE sp.traversal_id = p_trav AND sp.resource_id = k.rid AND sp.is_update = k.upd
                           FOR UPDATE) x;
END $$;

-- A batch of node steps (kiln_finish_nodes, kiln_replace_nodes) finds its
-- jobs, stacks and rows by key, one probe per key: a LATERAL subquery with a
-- lock or OFFSET 0 is never flattened into a join. Written as joins
-- (`id IN (SELECT … WHERE id = ANY(…))`), the cached generic plans made from
-- statistics an ANALYZE took mid-traversal walked the whole resource primary
-- key per batch (a merge join: every row of every stack), hashed every claimed
-- job of the database and scanned every locked row (test/db/plans.test.ts).

-- The jobs p_ids names that p_worker holds, in the order of p_ids. The holder
-- is checked outside the probe: inside it, a plan once searched the worker's
-- jobs (the locked_by index) for each id, the whole batch per job.
CREATE OR REPLACE FUNCTION kiln_batch_jobs(p_ids bigint[], p_worker uuid) RETURNS job[] LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN ARRAY(SELECT z.j FROM unnest(p_ids) WITH ORDINALITY AS k(id, n)
                CROSS JOIN LATERAL (SELECT j FROM job j WHERE j.id = k.id OFFSET 0) z
               WHERE (z.j).locked_by = p_worker
               ORDER BY k.n);
END $$;

-- A batch's first locks, in the lock order (10_events.sql): its jobs' stack
-- rows shared (1), then their resource rows and p_more_rows (2), each set in
-- id order.
CREATE OR REPLACE FUNCTION kiln_lock_batch(p_jobs job[], p_more_rows int[] DEFAULT '{}') RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1
     FROM (SELECT DISTINCT x.stack_id FROM unnest(p_jobs) x ORDER BY 1) k
    CROSS JOIN LATERAL (SELECT 1 FROM stack s WHERE s.id = k.stack_id FOR SHARE) z;
  PERFORM 1
     FROM (SELECT DISTINCT u.id FROM (SELECT x.resource_id FROM unnest(p_jobs) x UNION ALL SELECT unnest(p_more_rows)) AS u(id)
            WHERE u.id IS NOT NULL ORDER BY 1) k
    CROSS JOIN LATERAL (SELECT 1 FROM resource r WHERE r.id = k.id FOR UPDATE) z;
END $$;

-- What a locked node needs to run (row, inputs, scope).
CREATE OR REPLACE FUNCTION kiln_locked_reply(p_outcome text, p_row jsonb, p_s stack, p_t traversal, p_key int, p_upd boolean) RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN jsonb_build_object('outcome', p_outcome, 'resource', p_row,
    'inputs', kiln_node_inputs(p_t.id, p_key, p_upd),
    'replaces_uuid', (SELECT x.uuid FROM resource x WHERE x.id = (p_row->>'replaces')::int),
    'stack', jsonb_build_object('id', p_s.id, 'name', p_s.name, 'action', p_s.action),
    'traversal', jsonb_build_object('id', p_t.id, 'action', p_t.action, 'raw_template_id', p_t.raw_template_id, 'deadline', p_t.deadline));
END $$;

-- The last step of a begin, shared by kiln_begin_core and the finish that
-- begins a successor it made ready: lock the (unlocked) row for the worker
-- (engine_id, lease, atomic_key+1; `<action>_IN_PROGRESS` when the action is
-- known now), node RUNNING, its event, and what the worker needs to run it.
-- The caller holds the row and the sync point. Returns { result, events }.
CREATE OR REPLACE FUNCTION kiln_lock_node_row(p_r resource, p_s stack, p_t traversal, p_key int, p_upd boolean, p_sp sync_point, p_worker uuid, p_lease_ms int)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  r resource%ROWTYPE;
  v_action text := kiln_predicted_action(p_r, p_upd, p_t.raw_template_id, p_t.action);
  -- The engine decides from the state before this node touched the row.
  v_before jsonb := jsonb_build_object('action', p_r.action, 'status', p_r.status, 'status_reason', p_r.status_reason);
BEGIN
  UPDATE resource
     SET engine_id = p_worker, lock_traversal_id = p_t.id,
         lease_expires_at = now() + p_lease_ms * interval '1 millisecond',
         atomic_key = atomic_key + 1, last_traversal_id = p_t.id, updated_at = now(),
         action = coalesce(v_action, action),
         status = CASE WHEN v_action IS NULL THEN status ELSE 'IN_PROGRESS' END,
         status_reason = CASE WHEN v_action IS NULL THEN status_reason ELSE 'state changed' END
   WHERE id = p_r.id RETURNING * INTO r;
  UPDATE sync_point SET state = 'RUNNING', actor_id = r.id, updated_at = now()
   WHERE traversal_id = p_t.id AND resource_id = p_key AND is_update = p_upd;
  RETURN jsonb_build_object(
    'result', kiln_locked_reply('locked', to_jsonb(r) || v_before, p_s, p_t, p_key, p_upd),
    'events', jsonb_build_array(kiln_ev(CASE WHEN v_action IS NULL THEN 'node' ELSE 'resource' END, p_t.id, r.id, r.name, r.physical_id,
      CASE WHEN v_action IS NULL THEN NULL ELSE r.action END, CASE WHEN v_action IS NULL THEN NULL ELSE r.status END,
      CASE WHEN v_action IS NULL THEN 'running' ELSE 'state changed' END,
      jsonb_build_object('rid', p_key, 'update', p_upd, 'state', 'RUNNING', 'lock', 'acquired', 'worker', p_worker,
                         'lease_expires_at', r.lease_expires_at, 'satisfied', p_sp.satisfied, 'required', p_sp.required))));
END $$;

CREATE OR REPLACE FUNCTION kiln_begin_core(p_job bigint, p_worker uuid, p_lease_ms int, p_nowait boolean) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  j job%ROWTYPE;
  s stack%ROWTYPE;
  t traversal%ROWTYPE;
  sp sync_point%ROWTYPE;
  r resource%ROWTYPE;
  v_key int;
  v_lock jsonb;
  v_events jsonb := '[]';
  v_node jsonb;
  v_row_found boolean;
  v_later CONSTANT jsonb := '{"result": {"outcome": "later"}, "events": []}';
BEGIN
  SELECT * INTO j FROM job WHERE id = p_job;
  IF NOT FOUND OR j.locked_by IS DISTINCT FROM p_worker THEN
    RETURN jsonb_build_object('result', jsonb_build_object('outcome', 'gone'), 'events', '[]'::jsonb);
  END IF;
  -- Node steps share the stack row; a traversal start, a settle or a sweep
  -- (which take it exclusively) waits for them and they for it.
  IF p_nowait THEN
    SELECT * INTO s FROM stack WHERE id = j.stack_id FOR SHARE SKIP LOCKED;
    IF NOT FOUND AND EXISTS (SELECT 1 FROM stack WHERE id = j.stack_id) THEN RETURN v_later; END IF;
  ELSE
    SELECT * INTO s FROM stack WHERE id = j.stack_id FOR SHARE;
  END IF;
  IF j.park IS NOT NULL AND s.id IS NOT NULL THEN
    -- A parked node, woken (25_park.sql): it holds its row whatever became of its traversal.
    v_lock := kiln_resume_node(j, s, p_worker, p_lease_ms, p_nowait);
    IF v_lock IS NOT NULL THEN RETURN v_lock; END IF;
  END IF;
  IF s.id IS NULL OR s.current_traversal_id IS DISTINCT FROM j.traversal_id THEN
    DELETE FROM job WHERE id = p_job;
    RETURN jsonb_build_object('result', jsonb_build_object('outcome', 'stale', 'current_traversal_id', s.current_traversal_id), 'events', '[]'::jsonb);
  END IF;

  SELECT * INTO t FROM traversal WHERE id = j.traversal_id;
  v_key := coalesce(j.graph_key_id, j.resource_id);
  v_node := jsonb_build_object('rid', v_key, 'update', j.is_update);

  -- The row, then the node's sync point (lock order 2, 3): two jobs for one
  -- node (a requeue racing the original) queue here, and the second sees RUNNING.
  IF p_nowait THEN
    SELECT * INTO r FROM resource WHERE id = j.resource_id FOR UPDATE SKIP LOCKED;
    v_row_found := FOUND;
    IF NOT v_row_found AND EXISTS (SELECT 1 FROM resource WHERE id = j.resource_id) THEN RETURN v_later; END IF;
    SELECT * INTO sp FROM sync_point WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update FOR UPDATE SKIP LOCKED;
    IF NOT FOUND AND EXISTS (SELECT 1 FROM sync_point WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update) THEN
      RETURN v_later;
    END IF;
  ELSE
    SELECT * INTO r FROM resource WHERE id = j.resource_id FOR UPDATE;
    v_row_found := FOUND;
    SELECT * INTO sp FROM sync_point WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update FOR UPDATE;
  END IF;

  IF sp.state = 'RUNNING' AND sp.actor_id = j.resource_id AND r.engine_id = p_worker AND r.lock_traversal_id = j.traversal_id THEN
    -- A retry of a call that committed but whose reply was lost, or a step lost
    -- in a database crash (a lazy commit) whose job the worker gave back: answer
    -- as before. The row's state before that begin is not kept; a create it
    -- started is still a create (retried in place: physical names are stable per
    -- row), not an update of a row that was never made.
    RETURN jsonb_build_object('result', kiln_locked_reply('locked',
      to_jsonb(r) || CASE WHEN r.action = 'CREATE' AND r.status = 'IN_PROGRESS' AND r.properties IS NULL
                          THEN '{"action": "INIT", "status": "COMPLETE"}'::jsonb ELSE '{}' END,
      s, t, v_key, j.is_update), 'events', '[]'::jsonb);
  END IF;
  IF sp.state IS DISTINCT FROM 'READY' OR (sp.actor_id IS NOT NULL AND sp.actor_id <> j.resource_id) THEN
    DELETE FROM job WHERE id = p_job;
    RETURN jsonb_build_object('result', jsonb_build_object('outcome', 'duplicate', 'state', sp.state), 'events', '[]'::jsonb);
  END IF;

  IF t.failure_reason IS NULL AND t.deadline < now() THEN
    -- The traversal row comes after the sync points in the lock order; a
    -- begin that must not wait leaves the time-out to a plain begin.
    IF p_nowait THEN RETURN v_later; END IF;
    UPDATE traversal SET failure_reason = 'Timed out' WHERE id = t.id AND failure_reason IS NULL;
    IF FOUND THEN
      v_events := v_events || kiln_ev('stack', t.id, NULL, NULL, NULL, t.action, 'IN_PROGRESS', 'Timed out', jsonb_build_object('failing', true));
    END IF;
    SELECT * INTO t FROM traversal WHERE id = t.id;
  END IF;

  IF t.failure_reason IS NOT NULL OR NOT v_row_found THEN
    -- Failure policy: once a node failed, nothing new is started.
    IF NOT v_row_found AND t.failure_reason IS NULL THEN
      IF p_nowait THEN RETURN v_later; END IF;
      UPDATE traversal SET failure_reason = 'resource row ' || j.resource_id || ' vanished' WHERE id = t.id AND failure_reason IS NULL;
    END IF;
    UPDATE sync_point SET state = 'SKIPPED', updated_at = now()
     WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update;
    DELETE FROM job WHERE id = p_job;
    v_events := v_events || kiln_ev('node', t.id, j.resource_id, r.name, NULL, NULL, NULL, 'skipped: the traversal is failing',
                                    v_node || jsonb_build_object('state', 'SKIPPED'));
    RETURN jsonb_build_object('result', jsonb_build_object('outcome', 'skipped'), 'events', v_events, 'settle', t.id);
  END IF;

  IF r.engine_id IS NOT NULL AND r.lease_expires_at < now() THEN
    -- The holder stopped heartbeating: break its lock. The row can no longer be
    -- trusted (the action may have half happened), so it is FAILED (unless it
    -- was already deleted: kiln_status_after_dead_holder); an update node
    -- replaces it, a cleanup node deletes it. Its waiter stays, for this
    -- node's finish to retrigger.
    v_events := v_events || kiln_break_dead_lock(r, false);
    SELECT * INTO r FROM resource WHERE id = r.id;
  END IF;

  IF r.engine_id IS NOT NULL THEN
    -- Held by a live worker of an older traversal: stop here. The holder
    -- retriggers this node when it lets go (kiln_retrigger_waiter). A newer
    -- traversal's node overwrites an older waiter: only the newest matters.
    -- An update node waits for a delete it will undo too (as Heat does): the
    -- deleted row is then replaced. A replacement made beside the running
    -- delete would contend with it for whatever the two share outside Kiln
    -- (a Kiln::File's path, a database's name), which the delete still holds.
    UPDATE resource SET waiter_traversal_id = j.traversal_id, waiter_is_update = j.is_update WHERE id = r.id;
    UPDATE sync_point SET state = 'BLOCKED', updated_at = now()
     WHERE traversal_id = j.traversal_id AND resource_id = v_key AND is_update = j.is_update;
    DELETE FROM job WHERE id = p_job;
    v_events := v_events || kiln_ev('node', t.id, r.id, r.name, r.physical_id, NULL, NULL,
      'blocked: locked by an older traversal',
      v_node || jsonb_build_object('state', 'BLOCKED', 'blocked_by', r.lock_traversal_id, 'holder', r.engine_id, 'lease_expires_at', r.lease_expires_at));
    RETURN jsonb_build_object('result', jsonb_build_object('outcome', 'blocked', 'blocked_by', r.lock_traversal_id), 'events', v_events);
  END IF;

  v_lock := kiln_lock_node_row(r, s, t, v_key, j.is_update, sp, p_worker, p_lease_ms);
  RETURN jsonb_build_object('result', v_lock->'result', 'events', v_events || (v_lock->'events'));
END $$;

CREATE OR REPLACE FUNCTION kiln_begin_node(p_job bigint, p_worker uuid, p_lease_ms int) RETURNS jsonb LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_stack uuid := (SELECT stack_id FROM job WHERE id = p_job);
  v jsonb := kiln_begin_core(p_job, p_worker, p_lease_ms, false);
BEGIN
  PERFORM kiln_emit(v_stack, v->'events');
  RETURN (v->'result') || jsonb_build_object('settle', v->'settle');
END $$;

-- May a step that began a node with this result commit lazily (10_events.sql)?
-- Only if the node was not locked to act, or its row is of a lazy type.
CREATE OR REPLACE FUNCTION kiln_begun_lazily(p_result jsonb, p_lazy_types jsonb) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE p_result->>'outcome'
    WHEN 'locked' THEN coalesce(p_lazy_types ? (p_result->'resource'->>'type'), false)
    ELSE true END
$$;

