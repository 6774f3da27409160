-- kiln_in_progress_ev: a row's `<action>_IN_PROGRESS` event while its node
-- runs: written by kiln_mark_in_progress, kiln_park_node, or by
-- kiln_finish_node for an action too quick to mark.
CREATE OR REPLACE FUNCTION kiln_in_progress_ev(p_trav uuid, p_row resource, p_action text, p_rid int, p_upd boolean)
RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT kiln_ev('resource', p_trav, p_row.id, p_row.name, p_row.physical_id, p_action, 'IN_PROGRESS', 'state changed',
                 jsonb_build_object('rid', p_rid, 'update', p_upd, 'state', 'RUNNING'))
$$;
