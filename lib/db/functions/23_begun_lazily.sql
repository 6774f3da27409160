-- kiln_begun_lazily: may a step that began a node with this result commit
-- lazily (05_commit_lazily.sql)? Only if the node was not locked to act, or
-- its row is of a lazy type.
CREATE OR REPLACE FUNCTION kiln_begun_lazily(p_result jsonb, p_lazy_types jsonb) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE p_result->>'outcome'
    WHEN 'locked' THEN coalesce(p_lazy_types ? (p_result->'resource'->>'type'), false)
    ELSE true END
$$;
