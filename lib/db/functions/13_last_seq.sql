-- kiln_last_seq: the last event number of a stack (0 before the first
-- event): where a reader that starts following the stack begins.
CREATE OR REPLACE FUNCTION kiln_last_seq(p_stack uuid) RETURNS bigint LANGUAGE sql STABLE AS $$
  SELECT coalesce(max(seq), 0) FROM event WHERE stack_id = p_stack
$$;
