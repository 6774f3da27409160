/**
 * Drift marks on the stack page: what the latest drift check found per
 * resource row, from the resource listing's `drift` (loaded once) and from
 * the drift traversal's node events (`data.drift`, live). A mark holds only
 * while the check is `current`: an operation that changes resources (create,
 * update, rollback, delete) makes every finding stale, and a new drift check
 * replaces them. Pure.
 */
import type { DisplayNode, GraphModel } from './graph-model'
import { STATES, type DriftChange, type DriftMark, type DriftState } from './drift-mark'

export { driftOfEvent, isDrifted, type DriftChange, type DriftMark, type DriftState } from './drift-mark'

/** Actions whose traversal may change resources: once one starts, earlier drift findings no longer hold. */
const STALES_DRIFT: ReadonlySet<string> = new Set(['CREATE', 'UPDATE', 'ROLLBACK', 'DELETE'])


/** A row of `GET /api/stacks/{stack}/resources` as far as drift goes. */
export interface ListedDrift {
  id: number
  drift: { state: string; changes: DriftChange[]; problems: string[]; observedAt: string; traversalId: string } | null
}

/** The listing's current findings by row id. */
export function marksOfListing(rows: ListedDrift[]): Map<number, DriftMark> {
  const out = new Map<number, DriftMark>()
  for (const r of rows) {
    const d = r.drift
    if (!d || !STATES.has(d.state)) continue
    out.set(r.id, { state: d.state as DriftState, changed: d.changes.map((c) => c.property), problems: d.problems, at: d.observedAt, traversalId: d.traversalId, changes: d.changes })
  }
  return out
}

/**
 * Whether the stack's latest drift check may still be current, from its
 * traversals (newest first): a DRIFT traversal comes before any traversal
 * that changes resources. When not, the page need not ask for the findings.
 */
export function driftMayBeCurrent(traversals: readonly { action: string }[]): boolean {
  for (const t of traversals) {
    if (t.action === 'DRIFT') return true
    if (STALES_DRIFT.has(t.action)) return false
  }
  return false
}

/** A traversal of this action starting ends the marks shown: it changes resources, or it is a new check. */
export const endsMarks = (action: string): boolean => action === 'DRIFT' || STALES_DRIFT.has(action)

/** Gives each node of the model its row's mark (none: no mark). Returns the ids of the nodes whose mark changed. */
export function applyMarks(m: GraphModel, marks: ReadonlyMap<number, DriftMark>): Set<string> {
  const changed = new Set<string>()
  for (const n of m.nodes.values()) {
    const mark = marks.get(n.rowId) ?? null
    if (sameMark(n.drift, mark)) continue
    n.drift = mark
    changed.add(n.id)
  }
  return changed
}

function sameMark(a: DriftMark | null, b: DriftMark | null): boolean {
  if (a === b) return true
  if (!a || !b) return false
  return a.state === b.state && a.at === b.at && a.traversalId === b.traversalId && a.changed.join('\0') === b.changed.join('\0') && Boolean(a.changes) === Boolean(b.changes)
}

/** How many nodes drifted, by kind. */
export function driftCounts(m: GraphModel): { modified: number; deleted: number } {
  let modified = 0
  let deleted = 0
  for (const n of m.nodes.values()) {
    if (n.drift?.state === 'MODIFIED') modified++
    else if (n.drift?.state === 'DELETED') deleted++
  }
  return { modified, deleted }
}

/** The words a drift mark is shown with (table, graph label, panel). */
export function driftText(n: Pick<DisplayNode, 'drift'>): string {
  switch (n.drift?.state) {
    case 'MODIFIED':
      return 'drifted: modified'
    case 'DELETED':
      return 'drifted: deleted'
    default:
      return ''
  }
}

/** The drift mark's icon: a shape, so colour is never the only cue. */
export const DRIFT_ICON: Record<'MODIFIED' | 'DELETED', string> = { MODIFIED: '≠', DELETED: '⊘' }
