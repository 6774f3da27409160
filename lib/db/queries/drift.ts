/**
 * Drift results (table drift_result): written by a drift traversal's nodes,
 * one row per resource row checked, and read back per stack.
 */
import type pg from 'pg'
import type { DriftRecord } from '../../engine/ports'

/**
 * Store what a drift node found. A node run twice (its worker died after
 * this and before its finish) writes the same key again: the later look wins.
 */
export async function recordDrift(pool: pg.Pool, traversalId: string, r: DriftRecord): Promise<void> {
  await pool.query(
    `INSERT INTO drift_result (traversal_id, resource_id, stack_id, resource_name, state, changes, problems)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (traversal_id, resource_id) DO UPDATE
       SET state = EXCLUDED.state, changes = EXCLUDED.changes, problems = EXCLUDED.problems, observed_at = now()`,
    [traversalId, r.resourceId, r.stackId, r.resourceName, r.state, JSON.stringify(r.changes), r.problems],
  )
}

export interface StoredDrift {
  traversal: { id: string; startedAt: Date; endedAt: Date | null; outcome: string | null; outcomeReason: string; startedBy: string }
  /**
   * False when an operation that changes resources (create, update,
   * rollback, delete) started after this drift check: its findings may no
   * longer hold.
   */
  current: boolean
  results: { resourceId: number; resourceName: string; state: string; changes: { property: string; stored: unknown; seen: unknown }[]; problems: string[]; observedAt: Date; type: string | null; physicalId: string | null }[]
}

/** The stack's latest drift check and its findings, or null if none ever ran. */
export async function latestDrift(pool: pg.Pool, stackId: string): Promise<StoredDrift | null> {
  const { rows: [t] } = await pool.query(
    `SELECT t.id, t.started_at, t.ended_at, t.outcome, t.outcome_reason, t.started_by,
            NOT EXISTS (SELECT 1 FROM traversal x WHERE x.stack_id = t.stack_id AND x.started_at > t.started_at
                          AND x.action IN ('CREATE', 'UPDATE', 'ROLLBACK', 'DELETE')) AS current
       FROM traversal t WHERE t.stack_id = $1 AND t.action = 'DRIFT' ORDER BY t.started_at DESC LIMIT 1`,
    [stackId],
  )
  if (!t) return null
  const { rows } = await pool.query(
    `SELECT d.*, r.type, r.physical_id FROM drift_result d LEFT JOIN resource r ON r.id = d.resource_id
      WHERE d.traversal_id = $1 ORDER BY d.resource_name, d.resource_id`,
    [t.id],
  )
  return {
    traversal: { id: String(t.id), startedAt: t.started_at, endedAt: t.ended_at, outcome: t.outcome, outcomeReason: String(t.outcome_reason), startedBy: String(t.started_by) },
    current: Boolean(t.current),
    results: rows.map((r) => ({
      resourceId: Number(r.resource_id),
      resourceName: String(r.resource_name),
      state: String(r.state),
      changes: r.changes as StoredDrift['results'][number]['changes'],
      problems: (r.problems as string[]) ?? [],
      observedAt: r.observed_at,
      type: (r.type as string | null) ?? null,
      physicalId: (r.physical_id as string | null) ?? null,
    })),
  }
}
