/**
 * A stack's template versions (raw_template rows) and the traversals that
 * converged to them: what an edit was written against (`expect`), what a
 * conflict compares, and what `kiln stack diff` shows.
 */
import type pg from 'pg'
import type { StoredTemplateRow } from './preview'

export interface VersionRef {
  templateId: string
  /** The traversal named, or the newest one that converged to the template (null: none did yet). */
  traversalId: string | null
}

/** A traversal id or a template id of the stack, as the template version it names; null if it names neither. */
export async function resolveVersion(pool: pg.Pool, stackId: string, ref: string): Promise<VersionRef | null> {
  const { rows } = await pool.query(
    `SELECT raw_template_id AS template_id, id AS traversal_id FROM traversal WHERE id = $2 AND stack_id = $1
     UNION ALL
     SELECT rt.id, (SELECT t.id FROM traversal t WHERE t.raw_template_id = rt.id ORDER BY t.started_at DESC LIMIT 1)
       FROM raw_template rt WHERE rt.id = $2 AND rt.stack_id = $1
     LIMIT 1`,
    [stackId, ref],
  )
  const r = rows[0]
  return r ? { templateId: String(r.template_id), traversalId: r.traversal_id ?? null } : null
}

export async function templateRow(pool: pg.Pool, stackId: string, templateId: string): Promise<StoredTemplateRow | null> {
  const { rows } = await pool.query('SELECT id, source, template, environment, parameters FROM raw_template WHERE id = $1 AND stack_id = $2', [templateId, stackId])
  const t = rows[0]
  return t ? { id: String(t.id), source: String(t.source), template: t.template ?? {}, environment: t.environment ?? {}, parameters: t.parameters ?? {} } : null
}

export interface TraversalSummary {
  id: string
  action: string
  templateId: string
  startedBy: string
  startedAt: string
  endedAt: string | null
  outcome: string | null
}

/** A traversal of the stack (null: not one of its traversals). */
export async function traversalOf(pool: pg.Pool, stackId: string, traversalId: string): Promise<TraversalSummary | null> {
  const { rows } = await pool.query('SELECT id, action, raw_template_id, started_by, started_at, ended_at, outcome FROM traversal WHERE id = $1 AND stack_id = $2', [traversalId, stackId])
  const r = rows[0]
  return r
    ? { id: String(r.id), action: String(r.action), templateId: String(r.raw_template_id), startedBy: String(r.started_by), startedAt: new Date(r.started_at).toISOString(), endedAt: r.ended_at ? new Date(r.ended_at).toISOString() : null, outcome: r.outcome ?? null }
    : null
}

/** The traversals started after `since` (a traversal id; all when null), oldest first. */
export async function traversalsSince(pool: pg.Pool, stackId: string, since: string | null): Promise<TraversalSummary[]> {
  const { rows } = await pool.query(
    `SELECT id, action, raw_template_id, started_by, started_at, ended_at, outcome FROM traversal
      WHERE stack_id = $1 AND ($2::uuid IS NULL OR started_at > (SELECT started_at FROM traversal WHERE id = $2))
      ORDER BY started_at, id LIMIT 50`,
    [stackId, since],
  )
  return rows.map((r) => ({ id: String(r.id), action: String(r.action), templateId: String(r.raw_template_id), startedBy: String(r.started_by), startedAt: new Date(r.started_at).toISOString(), endedAt: r.ended_at ? new Date(r.ended_at).toISOString() : null, outcome: r.outcome ?? null }))
}
