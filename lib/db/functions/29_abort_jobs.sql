-- kiln_abort_jobs: the nodes a kiln_abort notice names (the same JSON:
-- stack_id, traversal_id, mode 'others' | 'this' | 'rows', rows, reason) are
-- told to stop, durably: the notice reaches only actions running in a worker
-- at that moment. Each node job in flight (claimed, or parked) keeps the
-- reason (`abort`): an action about to park answers it instead of parking
-- (kiln_park_node), and a parked node is woken to stop (its action starts
-- aborted when it resumes). Returns how many parked nodes were woken. Run in
-- the transaction that sends the notice, which holds the stack row
-- exclusively, so no node step of the stack is half-way meanwhile.
CREATE OR REPLACE FUNCTION kiln_abort_jobs(p_notice jsonb) RETURNS int LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
  v_stack uuid := (p_notice->>'stack_id')::uuid;
  v_trav uuid := (p_notice->>'traversal_id')::uuid;
  v_mode text := p_notice->>'mode';
  v_rows int[] := ARRAY(SELECT jsonb_array_elements_text(coalesce(p_notice->'rows', '[]'))::int);
  v_reason text := coalesce(p_notice->>'reason', 'aborted');
  v_n int;
BEGIN
  -- One statement for both: a parked job a claim takes meanwhile is waited for and
  -- still matches once claimed (two statements, one per kind, let it slip between them).
  WITH stopped AS (
    UPDATE job SET abort = coalesce(abort, v_reason),
           parked_until = CASE WHEN locked_by IS NULL THEN NULL ELSE parked_until END,
           wake_key = CASE WHEN locked_by IS NULL THEN NULL ELSE wake_key END
     WHERE stack_id = v_stack AND kind = 'check_resource' AND (locked_by IS NOT NULL OR park IS NOT NULL)
       AND CASE v_mode
             WHEN 'this' THEN traversal_id = v_trav
             WHEN 'rows' THEN traversal_id IS DISTINCT FROM v_trav AND resource_id = ANY(v_rows)
             ELSE traversal_id IS DISTINCT FROM v_trav
           END
    RETURNING locked_by)
  SELECT count(*) FILTER (WHERE locked_by IS NULL) INTO v_n FROM stopped;
  IF v_n > 0 THEN PERFORM pg_notify('kiln_jobs', ''); END IF;
  RETURN v_n;
END $$;
