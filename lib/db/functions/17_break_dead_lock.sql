-- kiln_break_dead_lock: break the lock of a worker that stopped heartbeating (p_row: the row as it
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

-- kiln_status_after_dead_holder (kiln_break_dead_lock's): the status a row is
-- left in when the lock of a worker that died is broken.
-- It can no longer be trusted (the action may have half happened): FAILED. A
-- row already deleted stays deleted: its holder (a cleanup with nothing left
-- to do, an update node that replaces it) cannot have changed anything, and a
-- DELETE_FAILED row would be a live resource again that no node of the
-- current traversal, planned while the row was gone, would clean up.
CREATE OR REPLACE FUNCTION kiln_status_after_dead_holder(p_row resource) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_row.action = 'DELETE' AND p_row.status = 'COMPLETE' THEN 'COMPLETE' ELSE 'FAILED' END
$$;
