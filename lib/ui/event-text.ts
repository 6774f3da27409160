/**
 * Events in plain words, for the node panel, the table, tooltips and the
 * timeline: "updated in place", "replaced by #7: update_replace is true",
 * "blocked: row locked by traversal 3f2a… on vm:4121". The engine's own
 * reasons ("state changed", "running") say what the code did, not what
 * happened to the resource. Pure.
 */
import type { EventRow } from './graph-model'

/** Worker id -> `hostname:pid` (what the page knows of them). */
export type WorkerNames = ReadonlyMap<string, string>

export const shortId = (id: string) => `${id.slice(0, 4)}…`

export function workerName(id: string | null | undefined, workers: WorkerNames): string {
  if (!id) return ''
  return workers.get(id) ?? `worker ${shortId(id)}`
}

const DOING: Record<string, string> = { CREATE: 'creating', UPDATE: 'updating in place', DELETE: 'deleting', CHECK: 'checking', ROLLBACK: 'rolling back' }
const DONE: Record<string, string> = { CREATE: 'created', UPDATE: 'updated in place', DELETE: 'deleted', CHECK: 'checked', ROLLBACK: 'rolled back' }

export function describeEvent(ev: EventRow, workers: WorkerNames = new Map()): string {
  const d = ev.data ?? {}
  const on = typeof d.worker === 'string' ? ` on ${workerName(d.worker, workers)}` : ''
  if (ev.kind === 'stack') return ev.reason
  if (ev.kind === 'traversal') {
    if (d.skipped) return `not run: the traversal ${ev.status === 'SUPERSEDED' ? 'was superseded' : ev.status === 'CANCELLED' ? 'was cancelled' : 'failed'} first`
    if (ev.status === 'SUPERSEDED') return typeof d.superseded_by === 'string' ? `superseded by traversal ${shortId(d.superseded_by)}` : 'superseded'
    return ev.reason
  }
  if (ev.kind === 'progress') return ev.reason
  if (ev.kind === 'lock' && d.lock === 'broken') return `lock broken: ${ev.reason}`
  if (typeof d.replaced_by === 'number') return `replaced by #${d.replaced_by}: ${ev.reason.replace(/^replaced:\s*/, '')}`
  const state = typeof d.state === 'string' ? d.state : null
  const cleanup = d.update === false
  switch (state) {
    case 'BLOCKED': {
      const by = typeof d.blocked_by === 'string' ? `traversal ${shortId(d.blocked_by)}` : 'an older traversal'
      const holder = typeof d.holder === 'string' ? ` on ${workerName(d.holder, workers)}` : ''
      return `blocked: row locked by ${by}${holder}`
    }
    case 'READY':
      if (d.retriggered === true) return 'retriggered: the older traversal let go of the row'
      return typeof d.required === 'number' && d.required > 0 ? `ready: all ${d.required} inputs reported` : 'ready'
    case 'WAITING':
      return typeof d.required === 'number' ? `waiting: ${d.satisfied ?? 0} of ${d.required} inputs reported` : 'waiting'
    case 'RUNNING':
      if (ev.kind === 'resource' && ev.action) return `${DOING[ev.action] ?? ev.action.toLowerCase()}${on}`
      return cleanup ? `cleanup started${on}` : `started${on}`
    case 'DONE':
      // A drift check's node: what it found ("modified outside Kiln: content", "in sync").
      if (typeof d.drift === 'string') return `drift check: ${ev.reason}`
      if (/already at the traversal template/.test(ev.reason)) return cleanup ? 'kept: nothing to clean up' : 'unchanged: already at this template'
      if (ev.kind === 'resource' && ev.action) return DONE[ev.action] ?? `${ev.action.toLowerCase()} complete`
      return cleanup ? 'cleanup done' : 'done'
    case 'FAILED':
      return `failed: ${ev.reason}`
    case 'SKIPPED':
      return ev.reason && ev.reason !== 'state changed' ? `skipped: ${ev.reason}` : 'skipped'
    default:
      return ev.reason === 'state changed' && ev.action && ev.status ? `${ev.action.toLowerCase()} ${ev.status.toLowerCase().replace('_', ' ')}` : ev.reason
  }
}
