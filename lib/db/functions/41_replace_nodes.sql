-- kiln_replace_nodes: the replace calls one worker has ready at the same
-- moment, in one transaction: one commit and one turn at the stack's event
-- lock instead of one each (a replace-all's first layer sends ten at once,
-- which queued on that lock). Lock order (10_events.sql) across the batch:
-- the stacks, the old rows, then every sync point the calls write (each
-- node's, and a waiter's in the stack's current traversal), each set in key
-- order; each call inside takes only locks the batch holds (its new row is
-- its own). p_items: [{ job, spec }] (spec as for kiln_replace_node); returns
-- the results in the same order.
CREATE OR REPLACE FUNCTION kiln_replace_nodes(p_worker uuid, p_items jsonb) RETURNS jsonb LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_ids bigint[] := ARRAY(SELECT (e->>'job')::bigint FROM jsonb_array_elements(p_items) e);
  k record;
  v jsonb;
  v_item jsonb;
  v_out jsonb[] := '{}';
  v_ev_stacks uuid[] := '{}';
  v_ev_lists jsonb[] := '{}';
  v_lazy boolean := true;
  v_notify boolean := false;
  v_jobs job[];
BEGIN
  -- Every key looked up one by one (kiln_batch_jobs, 42_batch_jobs.sql).
  v_jobs := kiln_batch_jobs(v_ids, p_worker);
  PERFORM kiln_lock_batch(v_jobs);
  FOR k IN
    WITH it AS (
      SELECT j.traversal_id, s.current_traversal_id AS cur, coalesce(j.graph_key_id, j.resource_id) AS node,
             r.id AS rid, r.waiter_traversal_id AS wt, r.waiter_is_update AS wu
        FROM jsonb_array_elements(p_items) e
        JOIN unnest(v_jobs) j ON j.id = (e->>'job')::bigint
        CROSS JOIN LATERAL (SELECT s.current_traversal_id FROM stack s WHERE s.id = j.stack_id OFFSET 0) s
        CROSS JOIN LATERAL (SELECT r.id, r.waiter_traversal_id, r.waiter_is_update FROM resource r WHERE r.id = j.resource_id OFFSET 0) r
    ), keys AS (
      SELECT cur AS trav, node AS rid, true AS upd FROM it WHERE traversal_id = cur
      UNION SELECT cur, rid, wu FROM it WHERE wt = cur
    )
    SELECT trav, array_agg(rid) AS rids, array_agg(upd) AS upds FROM keys GROUP BY trav ORDER BY trav
  LOOP
    PERFORM kiln_lock_sync_points(k.trav, k.rids, k.upds);
  END LOOP;

  FOR v_item IN SELECT e FROM jsonb_array_elements(p_items) e LOOP
    v := kiln_replace_node((v_item->>'job')::bigint, p_worker, v_item->'spec', false);
    -- Lazily only when every call of the batch may (a 'gone' one wrote nothing, but says no).
    v_lazy := v_lazy AND coalesce((v->>'lazy')::boolean, false);
    v_notify := v_notify OR coalesce((v->>'notify')::boolean, false);
    IF v ? 'events' THEN
      v_ev_stacks := v_ev_stacks || (v->>'stack_id')::uuid;
      v_ev_lists := v_ev_lists || (v->'events');
    END IF;
    v_out := v_out || (v - 'events' - 'stack_id' - 'lazy' - 'notify');
  END LOOP;
  IF v_lazy THEN PERFORM kiln_commit_lazily(); END IF;
  PERFORM kiln_emit_each(kiln_events_by_stack(v_ev_stacks, v_ev_lists));
  IF v_notify THEN PERFORM pg_notify('kiln_jobs', ''); END IF;
  RETURN to_jsonb(v_out);
END $$;
