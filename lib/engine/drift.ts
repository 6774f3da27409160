/**
 * Drift: what a resource type's `observe` saw, compared with what the engine
 * stored after the row's last action (pure). Used by the drift traversal, by
 * a stack check, by `converge` and by the recovery of a FAILED row.
 */
import { isDeepStrictEqual } from 'node:util'
import { shownValue } from '../resources/schema'
import type { Observation } from '../resources/types'

/** IN_SYNC: as stored; MODIFIED: properties differ, or the type names a problem; DELETED: gone; NOT_CHECKED: the type cannot observe. */
export type DriftState = 'IN_SYNC' | 'MODIFIED' | 'DELETED' | 'NOT_CHECKED'

export interface PropertyChange {
  property: string
  /** What the engine stored (null when it stored nothing under that name). */
  stored: unknown
  /** What observe saw. */
  seen: unknown
}

export interface DriftFinding {
  state: DriftState
  /** The observed properties that differ from the stored ones, by name. */
  changes: PropertyChange[]
  /** What the type found wrong beyond the properties. */
  problems: string[]
}

/** Compare an observation with the stored properties: only the properties observe reported are compared. */
export function compareObserved(stored: Record<string, unknown>, seen: Observation | null): DriftFinding {
  if (seen === null) return { state: 'NOT_CHECKED', changes: [], problems: [] }
  if (seen.state === 'gone') return { state: 'DELETED', changes: [], problems: [] }
  const changes = Object.keys(seen.properties)
    .sort()
    .filter((k) => !isDeepStrictEqual(stored[k] ?? null, seen.properties[k] ?? null))
    .map((k) => ({ property: k, stored: stored[k] ?? null, seen: seen.properties[k] ?? null }))
  const problems = seen.problems ?? []
  return { state: changes.length || problems.length ? 'MODIFIED' : 'IN_SYNC', changes, problems }
}

/** One line for a status reason or an event: `modified outside Kiln: content, mode; the login role … is missing`. */
export function describeDrift(f: DriftFinding): string {
  switch (f.state) {
    case 'IN_SYNC':
      return 'in sync'
    case 'NOT_CHECKED':
      return 'not checked: the type cannot observe its object'
    case 'DELETED':
      return 'deleted outside Kiln'
    case 'MODIFIED':
      return ['modified outside Kiln', [f.changes.length ? f.changes.map((c) => c.property).join(', ') : '', ...f.problems].filter(Boolean).join('; ')].join(': ')
  }
}

/** A stored value is cut beyond this many bytes (a file's content may be a megabyte; the diff shows its start). */
export const DRIFT_VALUE_BYTES = 4096

/** The changes as they are stored: each value at most DRIFT_VALUE_BYTES (JSON for a list or a map), with a note of its full size. */
export function boundedChanges(changes: PropertyChange[], maxBytes = DRIFT_VALUE_BYTES): PropertyChange[] {
  const cut = (v: unknown): unknown => {
    if (typeof v === 'string') return shownValue({ type: 'string', shownUpToBytes: maxBytes }, v)
    if (v === null || typeof v !== 'object') return v
    const text = JSON.stringify(v)
    return Buffer.byteLength(text) <= maxBytes ? v : shownValue({ type: 'string', shownUpToBytes: maxBytes }, text)
  }
  return changes.map((c) => ({ property: c.property, stored: cut(c.stored), seen: cut(c.seen) }))
}
