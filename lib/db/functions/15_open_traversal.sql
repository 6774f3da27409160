-- kiln_open_traversal: the writes that start a traversal, in the transaction
-- where startTraversal (lib/db/queries/traversal.ts) locked the stack row
-- (FOR NO KEY UPDATE: no node step of the stack runs meanwhile), read its
-- rows and built the graph. They were six to nine statements, one round trip
-- each (~0.5 ms apiece on this machine after an idle moment), all on the path
-- from a submit to its first node; now they are one.
--
--   1. supersede the previous traversal (its outcome; its sync points go),
--   2. store the new one, and its graph in traversal_graph,
--   3. point the stack at it,
--   4. one sync point per node (a cleanup node's with its successors, for the
--      step that completes it when it has nothing to do), a job per leaf in
--      the given order (cleanup leaves first),
--   5. the events, and NOTIFY kiln_jobs naming the traversal (a woken worker
--      loads its template and graph while it claims), or, with no nodes at
--      all, the traversal completes at once;
--   6. with p_abort, NOTIFY kiln_abort (a delete stops in-flight actions),
--      and wake the parked nodes it names to stop (kiln_abort_jobs).
--
-- enable_seqscan = off: PL/pgSQL keeps these plans per connection, and the
-- DELETEs by traversal must stay index scans however small sync_point was
-- when the plan was made (see 10_events.sql, "Plans").
CREATE OR REPLACE FUNCTION kiln_open_traversal(
  p_stack uuid, p_trav uuid, p_superseded uuid, p_action text,
  p_template uuid, p_stack_template uuid, p_started_by text, p_timeout_mins double precision, p_disable_rollback boolean,
  p_graph jsonb, p_roots int,
  p_rids int[], p_upds boolean[], p_required int[], p_successors jsonb[],
  p_leaf_rids int[], p_leaf_upds boolean[],
  p_abort jsonb
) RETURNS void LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  v_nodes int := coalesce(array_length(p_rids, 1), 0);
  v_reason text := 'Stack ' || p_action || ' started';
  v_events jsonb[] := '{}';
  v_project uuid;
BEGIN
  IF p_superseded IS NOT NULL THEN
    UPDATE traversal SET outcome = 'SUPERSEDED', outcome_reason = 'superseded by a newer operation', superseded_by_id = p_trav, ended_at = now()
     WHERE id = p_superseded AND outcome IS NULL;
    IF FOUND THEN
      v_events := v_events || kiln_ev('traversal', p_superseded, NULL, NULL, NULL, NULL, 'SUPERSEDED',
        'superseded by ' || p_action || ' ' || p_trav, jsonb_build_object('superseded_by', p_trav));
    END IF;
    DELETE FROM sync_input WHERE traversal_id = p_superseded;
    DELETE FROM sync_point WHERE traversal_id = p_superseded;
  END IF;

  INSERT INTO traversal (id, stack_id, action, raw_template_id, started_by, deadline, node_count, roots_pending)
  VALUES (p_trav, p_stack, p_action, p_template, p_started_by, now() + p_timeout_mins * interval '1 minute', v_nodes, p_roots);
  -- Its own table: node steps read the traversal row at every step (schema.prisma, TraversalGraph).
  INSERT INTO traversal_graph (traversal_id, graph) VALUES (p_trav, p_graph);

  UPDATE stack SET current_traversal_id = p_trav, action = p_action, status = 'IN_PROGRESS', status_reason = v_reason,
         raw_template_id = p_stack_template,
         prev_raw_template_id = CASE WHEN p_action = 'CREATE' THEN NULL ELSE raw_template_id END,
         updated_at = CASE WHEN p_action = 'CREATE' THEN updated_at ELSE now() END,
         timeout_mins = p_timeout_mins, disable_rollback = coalesce(p_disable_rollback, disable_rollback)
   WHERE id = p_stack RETURNING project_id INTO v_project;

  IF v_nodes > 0 THEN
    INSERT INTO sync_point (traversal_id, resource_id, is_update, stack_id, required, state, successors)
    SELECT p_trav, r, u, p_stack, q, CASE WHEN q = 0 THEN 'READY' ELSE 'WAITING' END, s
      FROM unnest(p_rids, p_upds, p_required, p_successors) AS x(r, u, q, s);
    INSERT INTO job (kind, stack_id, project_id, traversal_id, resource_id, is_update)
    SELECT 'check_resource', p_stack, v_project, p_trav, r, u
      FROM unnest(p_leaf_rids, p_leaf_upds) WITH ORDINALITY AS x(r, u, ord) ORDER BY ord;
  END IF;

  v_events := v_events || kiln_ev('stack', p_trav, NULL, NULL, NULL, p_action, 'IN_PROGRESS', v_reason,
    jsonb_build_object('action', p_action, 'nodes', v_nodes, 'started_by', p_started_by));
  PERFORM kiln_emit(p_stack, to_jsonb(v_events));
  IF v_nodes = 0 THEN
    PERFORM kiln_complete_traversal(p_stack, p_trav);
  ELSE
    PERFORM pg_notify('kiln_jobs', p_trav::text);
  END IF;
  IF p_abort IS NOT NULL THEN
    PERFORM pg_notify('kiln_abort', p_abort::text);
    PERFORM kiln_abort_jobs(p_abort);
  END IF;
END $$;
