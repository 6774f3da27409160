/**
 * Saved plans (the `plan` table): stored when computed, read, discarded,
 * and applied at most once. Applying checks, inside the transaction that
 * starts the traversal, that every live row still has the version
 * (atomic_key) the plan was computed against.
 */
import type pg from 'pg'
import type { TraversalPlan } from '../../engine/types'

export interface PlanRecord {
  id: string
  stackId: string
  createdBy: string
  source: string
  template: Record<string, unknown>
  environment: Record<string, unknown>
  parameters: Record<string, unknown>
  resources: TraversalPlan
  timeoutMins: number | null
  disableRollback: boolean | null
  preview: unknown
  againstTraversalId: string | null
  againstTemplateId: string | null
  rowVersions: Record<string, number>
  createdAt: Date
  expiresAt: Date
  appliedAt: Date | null
  appliedTraversalId: string | null
}

export type NewPlan = Omit<PlanRecord, 'id' | 'createdAt' | 'expiresAt' | 'appliedAt' | 'appliedTraversalId'> & { ttlMs: number }

function toPlan(r: Record<string, unknown>): PlanRecord {
  return {
    id: String(r.id),
    stackId: String(r.stack_id),
    createdBy: String(r.created_by),
    source: String(r.source),
    template: r.template as Record<string, unknown>,
    environment: r.environment as Record<string, unknown>,
    parameters: r.parameters as Record<string, unknown>,
    resources: r.resources as TraversalPlan,
    timeoutMins: r.timeout_mins === null ? null : Number(r.timeout_mins),
    disableRollback: (r.disable_rollback as boolean | null) ?? null,
    preview: r.preview,
    againstTraversalId: (r.against_traversal_id as string | null) ?? null,
    againstTemplateId: (r.against_template_id as string | null) ?? null,
    rowVersions: r.row_versions as Record<string, number>,
    createdAt: new Date(r.created_at as string),
    expiresAt: new Date(r.expires_at as string),
    appliedAt: r.applied_at ? new Date(r.applied_at as string) : null,
    appliedTraversalId: (r.applied_traversal_id as string | null) ?? null,
  }
}

/** Store a plan; the stack's plans that expired are dropped on the way (nothing else collects them). */
export async function insertPlan(pool: pg.Pool, p: NewPlan): Promise<PlanRecord> {
  await pool.query(`DELETE FROM plan WHERE stack_id = $1 AND expires_at < now() AND applied_at IS NULL`, [p.stackId])
  const { rows } = await pool.query(
    `INSERT INTO plan (stack_id, created_by, source, template, environment, parameters, resources, timeout_mins, disable_rollback, preview,
                       against_traversal_id, against_template_id, row_versions, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, now() + make_interval(secs => $14::double precision / 1000))
     RETURNING *`,
    [
      p.stackId, p.createdBy, p.source, JSON.stringify(p.template), JSON.stringify(p.environment), JSON.stringify(p.parameters), JSON.stringify(p.resources),
      p.timeoutMins, p.disableRollback, JSON.stringify(p.preview), p.againstTraversalId, p.againstTemplateId, JSON.stringify(p.rowVersions), p.ttlMs,
    ],
  )
  return toPlan(rows[0])
}

/** A plan of a stack of the project (null: no such plan there). `expired` is computed by the database's clock. */
export async function findPlan(pool: pg.Pool, projectId: string, planId: string): Promise<(PlanRecord & { expired: boolean }) | null> {
  const { rows } = await pool.query(
    `SELECT p.*, p.expires_at < now() AS expired FROM plan p JOIN stack s ON s.id = p.stack_id WHERE p.id = $1 AND s.project_id = $2 AND s.deleted_at IS NULL`,
    [planId, projectId],
  )
  return rows[0] ? { ...toPlan(rows[0]), expired: Boolean(rows[0].expired) } : null
}

export async function listPlans(pool: pg.Pool, stackId: string): Promise<(PlanRecord & { expired: boolean })[]> {
  const { rows } = await pool.query(`SELECT *, expires_at < now() AS expired FROM plan WHERE stack_id = $1 ORDER BY created_at DESC, id LIMIT 100`, [stackId])
  return rows.map((r) => ({ ...toPlan(r), expired: Boolean(r.expired) }))
}

export async function deletePlan(pool: pg.Pool, stackId: string, planId: string): Promise<boolean> {
  const { rowCount } = await pool.query('DELETE FROM plan WHERE id = $1 AND stack_id = $2', [planId, stackId])
  return (rowCount ?? 0) > 0
}

export interface RowDrift {
  id: number
  name: string
  /** What the row is now (null: it is gone). */
  now: string | null
  change: 'changed' | 'added' | 'removed'
}

/** Rows whose version differs from `versions` (changed, added or removed since). Run inside the start's transaction. */
export async function rowDrift(client: pg.PoolClient, stackId: string, versions: Record<string, number>): Promise<RowDrift[]> {
  const { rows } = await client.query(
    `SELECT id, name, action, status, atomic_key FROM resource WHERE stack_id = $1 AND NOT (action = 'DELETE' AND status = 'COMPLETE') ORDER BY id`,
    [stackId],
  )
  const out: RowDrift[] = []
  const seen = new Set<string>()
  for (const r of rows) {
    const id = String(r.id)
    seen.add(id)
    const state = `${r.action}_${r.status}`
    if (!Object.hasOwn(versions, id)) out.push({ id: Number(r.id), name: String(r.name), now: state, change: 'added' })
    else if (Number(versions[id]) !== Number(r.atomic_key)) out.push({ id: Number(r.id), name: String(r.name), now: state, change: 'changed' })
  }
  const gone = Object.keys(versions).filter((id) => !seen.has(id))
  if (gone.length) {
    const { rows: names } = await client.query('SELECT id, name FROM resource WHERE id = ANY($1::int[])', [gone.map(Number)])
    const nameOf = new Map(names.map((r) => [String(r.id), String(r.name)]))
    for (const id of gone) out.push({ id: Number(id), name: nameOf.get(id) ?? `#${id}`, now: null, change: 'removed' })
  }
  return out
}

/** Mark a plan applied, inside the start's transaction (once: false if it already was). */
export async function markPlanApplied(client: pg.PoolClient, planId: string): Promise<boolean> {
  const { rowCount } = await client.query('UPDATE plan SET applied_at = now() WHERE id = $1 AND applied_at IS NULL', [planId])
  return (rowCount ?? 0) > 0
}

/** The traversal an applied plan started (set once the start committed). */
export async function setPlanTraversal(pool: pg.Pool, planId: string, traversalId: string): Promise<void> {
  await pool.query('UPDATE plan SET applied_traversal_id = $2 WHERE id = $1', [planId, traversalId])
}
