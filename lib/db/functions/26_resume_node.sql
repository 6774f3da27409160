-- kiln_resume_node: the begin of a parked node's job (kiln_begin_core), before
-- any other check: whatever became of its traversal, the node holds its row,
-- and only running its action to an end lets the row go (a superseded
-- traversal's node then releases it and retriggers the newer node waiting for
-- it, as an action that ran on does). Takes the row's lock over from the park
-- for p_worker and answers what the worker needs to run the node: the row as
-- it was before the node began, the inputs it parked with, and `resumed`
-- (since, until, whether its time is up, and why it must stop if it must:
-- the job's `abort`). NULL when the row
-- is no longer held by this park (the lock was broken meanwhile): the job is
-- then an ordinary one. With p_nowait, 'later' when the row is busy.
CREATE OR REPLACE FUNCTION kiln_resume_node(j job, s stack, p_worker uuid, p_lease_ms int, p_nowait boolean) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  r resource%ROWTYPE;
  t traversal%ROWTYPE;
  v_key int := coalesce(j.graph_key_id, j.resource_id);
BEGIN
  IF p_nowait THEN
    SELECT * INTO r FROM resource WHERE id = j.resource_id FOR UPDATE SKIP LOCKED;
    IF NOT FOUND AND EXISTS (SELECT 1 FROM resource WHERE id = j.resource_id) THEN
      RETURN '{"result": {"outcome": "later"}, "events": []}'::jsonb;
    END IF;
  ELSE
    SELECT * INTO r FROM resource WHERE id = j.resource_id FOR UPDATE;
  END IF;
  IF r.id IS NULL OR r.engine_id IS DISTINCT FROM kiln_parked_holder() OR r.lock_traversal_id IS DISTINCT FROM j.traversal_id THEN
    UPDATE job SET park = NULL, parked_until = NULL, wake_key = NULL WHERE id = j.id;
    RETURN NULL;
  END IF;
  SELECT * INTO t FROM traversal WHERE id = j.traversal_id;
  -- The stop notice as of now (kiln_begin_core read the job before it locked the stack row).
  SELECT abort INTO j.abort FROM job WHERE id = j.id;
  UPDATE job SET parked_until = NULL, wake_key = NULL WHERE id = j.id AND (parked_until IS NOT NULL OR wake_key IS NOT NULL);
  UPDATE resource SET engine_id = p_worker, lease_expires_at = now() + p_lease_ms * interval '1 millisecond',
         atomic_key = atomic_key + 1, updated_at = now()
   WHERE id = r.id RETURNING * INTO r;
  RETURN jsonb_build_object(
    'result', kiln_locked_reply('locked', to_jsonb(r) || coalesce(j.park->'before', '{}'), s, t, v_key, j.is_update)
              || jsonb_build_object('inputs', coalesce(j.park->'inputs', '[]'::jsonb),
                                    'resumed', jsonb_build_object('since', j.park->'since', 'until', j.park->'until',
                                                                  'due', coalesce(j.park->'due', 'false'), 'abort', j.abort)),
    'events', jsonb_build_array(kiln_ev('node', t.id, r.id, r.name, r.physical_id, NULL, NULL,
      CASE WHEN j.abort IS NOT NULL THEN 'resumed to stop: ' || j.abort ELSE 'resumed' END,
      jsonb_build_object('rid', v_key, 'update', j.is_update, 'state', 'RUNNING', 'lock', 'acquired', 'worker', p_worker,
                         'lease_expires_at', r.lease_expires_at, 'resumed', true))));
END $$;
