-- kiln_retrigger_waiter: a row's lock was let go (a finish, a replacement, the
-- sweeper breaking it); the node of a newer traversal that found it locked
-- and registered as its waiter (kiln_begin_core, 'blocked') is made READY
-- again and queued. Every exit path of a lock holder comes through here.
--
-- Takes the stack row (as the caller read it), the row's id and the waiter
-- it had (p_trav NULL: none). Returns the event, or NULL when nothing was
-- retriggered: the waiter's traversal is no longer the stack's current one,
-- or its node is no longer BLOCKED.
-- Assumes locked: the stack row (shared at least), the resource row, and the
-- waiter's sync point when it is of the current traversal (lock order 3).
-- Writes: the waiter's sync point (READY), a job for it (the caller counts
-- it as queued and sends NOTIFY kiln_jobs).
CREATE OR REPLACE FUNCTION kiln_retrigger_waiter(p_stack stack, p_rid int, p_trav uuid, p_upd boolean) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  v_name text;
BEGIN
  IF p_trav IS NULL OR p_stack.current_traversal_id IS DISTINCT FROM p_trav THEN RETURN NULL; END IF;
  UPDATE sync_point SET state = 'READY', actor_id = NULL, updated_at = now()
   WHERE traversal_id = p_trav AND resource_id = p_rid AND is_update = p_upd AND state = 'BLOCKED';
  IF NOT FOUND THEN RETURN NULL; END IF;
  INSERT INTO job (kind, stack_id, project_id, traversal_id, resource_id, is_update) VALUES ('check_resource', p_stack.id, p_stack.project_id, p_trav, p_rid, p_upd);
  SELECT name INTO v_name FROM resource WHERE id = p_rid;
  RETURN kiln_ev('node', p_trav, p_rid, v_name, NULL, NULL, NULL, 'retriggered: the older traversal released the lock',
                 jsonb_build_object('rid', p_rid, 'update', p_upd, 'state', 'READY', 'retriggered', true));
END $$;
