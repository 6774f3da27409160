/**
 * A drift mark: what a drift check found for one resource row, and how a
 * drift traversal's node event names it. Apart from lib/ui/drift.ts so that
 * the graph model can fold marks in without importing the page's drift logic
 * (which reads the model). Pure.
 */
export type DriftState = 'IN_SYNC' | 'MODIFIED' | 'DELETED' | 'NOT_CHECKED'

export interface DriftChange {
  property: string
  stored: unknown
  seen: unknown
}

export interface DriftMark {
  state: DriftState
  /** the properties that differ (their values: `changes`, from the listing, masked) */
  changed: string[]
  problems: string[]
  /** when the resource was observed */
  at: string
  /** the drift check that found it */
  traversalId: string
  /** stored and seen values, when the mark came from the resource listing */
  changes?: DriftChange[]
}

export const STATES: ReadonlySet<string> = new Set<DriftState>(['IN_SYNC', 'MODIFIED', 'DELETED', 'NOT_CHECKED'])

/** MODIFIED or DELETED: the real thing differs from what Kiln stored. */
export const isDrifted = (m: DriftMark | null | undefined): boolean => m?.state === 'MODIFIED' || m?.state === 'DELETED'

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [])

/** The finding a drift traversal's node event names (`data.drift`), or null. */
export function driftOfEvent(ev: { data?: Record<string, unknown> | null; traversalId: string | null; at: string }): DriftMark | null {
  const d = ev.data
  if (!d || typeof d.drift !== 'string' || !STATES.has(d.drift) || !ev.traversalId) return null
  return { state: d.drift as DriftState, changed: strings(d.changed), problems: strings(d.problems), at: ev.at, traversalId: ev.traversalId }
}
