-- CreateTable
CREATE TABLE "drift_result" (
    "traversal_id" UUID NOT NULL,
    "resource_id" INTEGER NOT NULL,
    "stack_id" UUID NOT NULL,
    "resource_name" TEXT NOT NULL,
    "state" TEXT NOT NULL,
    "changes" JSONB NOT NULL DEFAULT '[]',
    "problems" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "observed_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "drift_result_pkey" PRIMARY KEY ("traversal_id","resource_id")
);

-- AddForeignKey
ALTER TABLE "drift_result" ADD CONSTRAINT "drift_result_traversal_id_fkey" FOREIGN KEY ("traversal_id") REFERENCES "traversal"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- lib/db/functions/20_begin_node.sql
-- kiln_begin_node: a worker that claimed a check_resource job asks to work on
-- its node. One round trip, one transaction (lock order: 10_events.sql):
--
--   1. the job's traversal must still be the stack's current one   -> else 'stale'
--   2. the node must be READY (not already taken or done)           -> else 'duplicate'
--   3. the traversal must not have failed or timed out              -> else 'skipped'
--   4. the resource row must be unlocked:
--        lease of the holder ran out -> break its lock (row FAILED), go on
--        update node, row being deleted by an older traversal -> 'replace_deleting'
--        held by a live worker      -> register as the row's waiter, 'blocked'
--                                      (the holder retriggers us when it lets go)
--   5. lock it (engine_id, lease, atomic_key+1), node RUNNING        -> 'locked'
--
-- Terminal outcomes delete the job; 'locked' keeps it until kiln_finish_node.
--
-- kiln_begin_core does the work without emitting, so that a finish, a
-- replacement or a claim can begin a node in its own transaction and publish
-- everything once. With p_nowait it never waits for a lock (the caller
-- already holds later locks of the lock order): whatever would wait answers
-- 'later', changes nothing, and the job stays claimed for a plain begin.
-- It returns { result, events, settle } where settle names a traversal that
-- may have ended (kiln_settle, run by the caller after commit).

CREATE OR REPLACE FUNCTION kiln_predicted_action(p_row resource, p_is_update boolean, p_template uuid, p_stack_action text)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN p_stack_action = 'CHECK' THEN 'CHECK'
    -- a drift check only looks: the row keeps its action and status
    WHEN p_stack_action = 'DRIFT' THEN NULL
    -- creating: a new row, or one whose create never completed (retried in place: idempotent physical names)
    WHEN p_is_update THEN CASE WHEN p_row.action = 'INIT' OR (p_row.action = 'CREATE' AND p_row.status = 'FAILED' AND p_row.properties IS NULL) THEN 'CREATE' END
    WHEN p_row.current_template_id IS DISTINCT FROM p_template AND NOT (p_row.action = 'DELETE' AND p_row.status = 'COMPLETE') THEN 'DELETE'
  END
$$;

-- lib/db/functions/30_finish_node.sql
-- The last root reported: the stack is COMPLETE. Rows deleted by this (or an
-- earlier) traversal are purged; a DELETE traversal soft-deletes the stack.
CREATE OR REPLACE FUNCTION kiln_complete_traversal(p_stack uuid, p_trav uuid) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  t traversal%ROWTYPE;
  s stack%ROWTYPE;
  v_reason text;
BEGIN
  SELECT * INTO t FROM traversal WHERE id = p_trav;
  v_reason := 'Stack ' || t.action || ' completed successfully';
  UPDATE stack SET status = 'COMPLETE', status_reason = v_reason,
         last_good_template_id = CASE WHEN t.action IN ('DELETE', 'CHECK', 'DRIFT') THEN last_good_template_id ELSE t.raw_template_id END,
         deleted_at = CASE WHEN t.action = 'DELETE' THEN now() ELSE deleted_at END
   WHERE id = p_stack AND current_traversal_id = p_trav AND status = 'IN_PROGRESS' RETURNING * INTO s;
  IF NOT FOUND THEN RETURN; END IF;
  UPDATE traversal SET outcome = 'COMPLETE', outcome_reason = v_reason, ended_at = now() WHERE id = p_trav;
  PERFORM kiln_emit(p_stack, jsonb_build_array(kiln_ev('stack', p_trav, NULL, NULL, NULL, s.action, 'COMPLETE', v_reason, NULL)));
  PERFORM kiln_notify_settled(p_stack, p_trav, s.action, 'COMPLETE');
  DELETE FROM resource WHERE stack_id = p_stack AND action = 'DELETE' AND status = 'COMPLETE' AND engine_id IS NULL;
  DELETE FROM sync_input WHERE traversal_id = p_trav;
  DELETE FROM sync_point WHERE traversal_id = p_trav;
END $$;
