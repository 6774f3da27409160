-- Events of several stacks gathered in one transaction (a claim, a batch of
-- finishes) as {stack_id: [event, …]}, published per stack in stack-id order:
-- the event lock comes last and is taken in one order. Built once from what
-- the step gathered as two arrays (p_lists[i] is the jsonb array of events of
-- p_stacks[i]), not merged item by item: each merge re-encoded the whole
-- growing object.
CREATE OR REPLACE FUNCTION kiln_events_by_stack(p_stacks uuid[], p_lists jsonb[]) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT coalesce(jsonb_object_agg(st, evs), '{}') FROM (
    SELECT u.st::text AS st, jsonb_agg(x.e ORDER BY u.n, x.m) AS evs
      FROM unnest(p_stacks, p_lists) WITH ORDINALITY u(st, list, n)
     CROSS JOIN LATERAL jsonb_array_elements(u.list) WITH ORDINALITY x(e, m)
     GROUP BY u.st) z
$$;

-- kiln_emit_each: publish what kiln_events_by_stack built, one kiln_emit per
-- stack, in stack-id order.
CREATE OR REPLACE FUNCTION kiln_emit_each(p_by_stack jsonb) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_stack text;
BEGIN
  FOR v_stack IN SELECT k FROM jsonb_object_keys(p_by_stack) k ORDER BY k::uuid LOOP
    PERFORM kiln_emit(v_stack::uuid, p_by_stack->v_stack);
  END LOOP;
END $$;
