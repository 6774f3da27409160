-- kiln_finish_nodes: the finishes one worker has ready at the same moment for
-- one stack, in one transaction — one commit, one turn at the event lock —
-- instead of one after another (ten nodes that end together report into the
-- same successors, so their separate finishes would queue on those sync
-- points, each holding them through its commit).
--
-- Lock order (10_events.sql) across the whole batch: the stack row, every
-- row the finishes write (their own, and replacements whose `replaces` a
-- cleanup clears), then every sync point they write, each set in key order.
-- Each finish below then takes only locks the batch already holds, and
-- successors' rows SKIP LOCKED. One stack per batch, so one traversal row,
-- whose roots countdown the batch does once, after the finishes: the row
-- (lock order 4) is then held only through the commit, not through the whole
-- batch — every finish of a wide graph's is a root, and batches that took it
-- at their first root queued on each other for their whole length.
-- p_items: [{ job, result }] (result as for kiln_finish_node); returns the
-- results in the same order.
CREATE OR REPLACE FUNCTION kiln_finish_nodes(p_worker uuid, p_items jsonb) RETURNS jsonb LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_ids bigint[] := ARRAY(SELECT (e->>'job')::bigint FROM jsonb_array_elements(p_items) e);
  v_deleting bigint[] := ARRAY(SELECT (e->>'job')::bigint FROM jsonb_array_elements(p_items) e WHERE (e->'result'->>'deleted')::boolean);
  k record;
  v jsonb;
  v_item jsonb;
  -- jsonb[] accumulators, turned into jsonb once at the end (see kiln_finish_node)
  v_out jsonb[] := '{}';
  v_ev_stacks uuid[] := '{}';
  v_ev_lists jsonb[] := '{}';
  v_queued int := 0;
  v_budget int;
  v_lazy boolean := true;
  v_roots int := 0;
  v_root_of uuid;
  v_last_root int;
  v_pending int;
  v_jobs job[];
  v_rows int[];
BEGIN
  -- Every key looked up one by one (kiln_batch_jobs, 42_batch_jobs.sql).
  v_jobs := kiln_batch_jobs(v_ids, p_worker);
  -- The rows the finishes write: their own, and a deleted row's replacement
  -- (whose `replaces` its cleanup clears).
  IF cardinality(v_deleting) > 0 THEN
    v_rows := ARRAY(SELECT z.id FROM unnest(v_jobs) x
                     CROSS JOIN LATERAL (SELECT r.id FROM resource r WHERE r.replaces = x.resource_id OFFSET 0) z
                    WHERE x.id = ANY(v_deleting));
  END IF;
  PERFORM kiln_lock_batch(v_jobs, coalesce(v_rows, '{}'));
  -- The sync points each finish will write: its own node and, on success, its
  -- successors (current traversal only), and its row's waiter.
  FOR k IN
    WITH it AS (
      SELECT j.traversal_id, coalesce(j.graph_key_id, j.resource_id) AS node, j.is_update, s.current_traversal_id AS cur,
             r.id AS rid, r.waiter_traversal_id AS wt, r.waiter_is_update AS wu,
             coalesce((e->'result'->>'ok')::boolean, false) AS ok, coalesce(e->'result'->'successors', '[]') AS succs
        FROM jsonb_array_elements(p_items) e
        JOIN unnest(v_jobs) j ON j.id = (e->>'job')::bigint
        CROSS JOIN LATERAL (SELECT s.current_traversal_id FROM stack s WHERE s.id = j.stack_id OFFSET 0) s
        -- the holder checked outside the probe (as in kiln_batch_jobs): inside, a
        -- plan searched every locked row (the lease index) for each row
        CROSS JOIN LATERAL (SELECT r.id, r.engine_id, r.waiter_traversal_id, r.waiter_is_update FROM resource r
                             WHERE r.id = j.resource_id OFFSET 0) r
       WHERE r.engine_id = p_worker
    ), keys AS (
      SELECT cur AS trav, node AS rid, is_update AS upd FROM it WHERE traversal_id = cur
      UNION SELECT cur, (x->>0)::int, (x->>1)::boolean FROM it, jsonb_array_elements(it.succs) x WHERE traversal_id = cur AND ok
      UNION SELECT cur, rid, wu FROM it WHERE wt = cur
    )
    SELECT trav, array_agg(rid) AS rids, array_agg(upd) AS upds FROM keys GROUP BY trav ORDER BY trav
  LOOP
    PERFORM kiln_lock_sync_points(k.trav, k.rids, k.upds);
  END LOOP;

  -- The worker's free slots are one budget for the whole batch, not one per finish.
  v_budget := (SELECT max(coalesce((e->'result'->>'claim_max')::int, 1)) FROM jsonb_array_elements(p_items) e);
  FOR v_item IN SELECT e FROM jsonb_array_elements(p_items) e LOOP
    v := kiln_finish_node((v_item->>'job')::bigint, p_worker,
           jsonb_set(v_item->'result', '{claim_max}', to_jsonb(greatest(v_budget, 0))), false);
    v_budget := v_budget - coalesce(jsonb_array_length(v->'claimed'), 0);
    v_lazy := v_lazy AND coalesce((v->>'lazy')::boolean, false);
    IF v->>'root_of' IS NOT NULL THEN
      v_roots := v_roots + (v->>'roots')::int;
      v_root_of := (v->>'root_of')::uuid;
      v_last_root := cardinality(v_out); -- 0-based index of this item
    END IF;
    IF v ? 'events' THEN
      v_ev_stacks := v_ev_stacks || (v->>'stack_id')::uuid;
      v_ev_lists := v_ev_lists || (v->'events');
      v_queued := v_queued + (v->>'queued')::int;
    END IF;
    v_out := v_out || (v - 'events' - 'stack_id' - 'lazy' - 'root_of' - 'roots');
  END LOOP;
  IF v_roots <> 0 THEN
    UPDATE traversal SET roots_pending = roots_pending - v_roots WHERE id = v_root_of RETURNING roots_pending INTO v_pending;
    IF v_pending = 0 THEN
      v_out[v_last_root + 1] := jsonb_set(v_out[v_last_root + 1], '{settle}', to_jsonb(v_root_of));
    END IF;
  END IF;
  -- Lazily only when every finish of the batch may (a 'gone' one wrote nothing to speak of, but says no).
  IF v_lazy THEN PERFORM kiln_commit_lazily(); END IF;
  PERFORM kiln_emit_each(kiln_events_by_stack(v_ev_stacks, v_ev_lists));
  IF v_queued > 0 THEN PERFORM pg_notify('kiln_jobs', ''); END IF;
  RETURN to_jsonb(v_out);
END $$;
