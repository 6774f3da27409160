/**
 * What a traversal did to each resource name, read from its events, and the
 * comparison of that with what a preview said it would do:
 *   - the names it creates, replaces or deletes are exactly the ones the
 *     preview said it *will* create, replace or delete, plus any it said it
 *     *may* replace;
 *   - every name it updated in place was marked will update or may update
 *     (or may replace: an uncertain replacement may end as an update);
 *   - nothing marked unchanged was touched.
 */
import type pg from 'pg'
import type { PreviewItem, PreviewResult } from '../../lib/plan/preview-types'

export type Did = 'create' | 'update' | 'replace' | 'delete'

/** Per resource name, what traversal `traversalId` did (names it left alone are absent). `before`: names with a live row before it. */
export async function whatItDid(pool: pg.Pool, traversalId: string, before: Set<string>): Promise<Map<string, Did>> {
  const { rows } = await pool.query(
    `SELECT resource_name AS name, action FROM event WHERE traversal_id = $1 AND kind = 'resource' AND status = 'COMPLETE' AND action IN ('CREATE', 'UPDATE', 'DELETE') ORDER BY seq`,
    [traversalId],
  )
  const { rows: alive } = await pool.query(
    `SELECT DISTINCT r.name FROM resource r JOIN traversal t ON t.stack_id = r.stack_id WHERE t.id = $1 AND NOT (r.action = 'DELETE' AND r.status = 'COMPLETE')`,
    [traversalId],
  )
  const stillThere = new Set(alive.map((r) => String(r.name)))
  const did = new Map<string, Did>()
  for (const r of rows) {
    const name = String(r.name)
    if (r.action === 'CREATE') did.set(name, before.has(name) ? 'replace' : 'create')
    else if (r.action === 'UPDATE' && !did.has(name)) did.set(name, 'update')
    else if (r.action === 'DELETE' && !stillThere.has(name)) did.set(name, 'delete')
  }
  return did
}

/** Names with a live, created row now (what `whatItDid` needs as `before`). */
export async function liveNames(pool: pg.Pool, stackId: string): Promise<Set<string>> {
  const { rows } = await pool.query(`SELECT DISTINCT name FROM resource WHERE stack_id = $1 AND action <> 'INIT' AND NOT (action = 'DELETE' AND status = 'COMPLETE')`, [stackId])
  return new Set(rows.map((r) => String(r.name)))
}

const label = (i: PreviewItem) => `${i.certain ? '' : 'may '}${i.action}`

/** Disagreements between a preview and what the traversal did; empty when they agree. */
export function disagreements(preview: PreviewResult, did: Map<string, Did>): string[] {
  const out: string[] = []
  const byName = new Map(preview.items.map((i) => [i.name, i]))
  for (const [name, action] of did) {
    const i = byName.get(name)
    if (!i) {
      out.push(`${name}: ${action}d, but the preview does not list it`)
      continue
    }
    const fits = action === 'update' ? i.action === 'update' || (i.action === 'replace' && !i.certain) : i.action === action && (i.certain || action === 'replace')
    if (!fits) out.push(`${name}: the traversal ${action === 'update' ? 'updated it in place' : `${action}d it`}; the preview said ${label(i)}${i.reason ? ` (${i.reason})` : ''}`)
  }
  for (const i of preview.items) {
    if (did.has(i.name)) continue
    if (i.certain && i.action !== 'unchanged') out.push(`${i.name}: the preview said ${label(i)}; the traversal left it alone`)
  }
  return out
}

/** name → "update", "may update", … (a compact view for assertions). */
export const actions = (p: PreviewResult) => Object.fromEntries(p.items.map((i) => [i.name, label(i)]))
