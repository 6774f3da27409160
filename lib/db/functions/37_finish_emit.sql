-- kiln_finish_emit: step 7 of kiln_finish_node, its last: the transaction
-- commits lazily when every row it released or locked is of a lazy type
-- (kiln_commit_lazily), its events are numbered and stored (kiln_emit: the
-- stack's event lock, last in the lock order, held to commit), workers hear
-- of the jobs it queued (NOTIFY kiln_jobs), and the worker gets its reply. A
-- finish in a batch (kiln_finish_nodes) skips it: the batch does the same
-- once for all.
--
-- Takes: the stack's id, the events in order, whether it may commit lazily,
--   how many jobs it queued, the successors claimed ([{ job, begun }]) and
--   the traversal to settle (or NULL).
-- Returns: the reply, { outcome: 'ok', claimed, queued, settle }.
-- Assumes locked: whatever the finish locked; takes the event lock.
-- Writes: event rows; the transaction's synchronous_commit.
CREATE OR REPLACE FUNCTION kiln_finish_emit(p_stack uuid, p_events jsonb[], p_lazy boolean, p_queued int, p_claimed jsonb, p_settle uuid) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  -- The void calls below are assignments to it rather than PERFORMs: a
  -- PERFORM runs its call as a query, ~3 µs more per call (measured), and a
  -- finish makes these calls every time.
  v_void text;
BEGIN
  IF p_lazy THEN v_void := kiln_commit_lazily(); END IF;
  v_void := kiln_emit(p_stack, to_jsonb(p_events));
  IF p_queued > 0 THEN v_void := pg_notify('kiln_jobs', ''); END IF;
  RETURN jsonb_build_object('outcome', 'ok', 'claimed', p_claimed, 'queued', p_queued, 'settle', p_settle);
END $$;
