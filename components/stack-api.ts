/**
 * The stack page's REST reads, typed. Each is one request (events: one per
 * page of 5,000); the live view makes them once per load, once per new
 * traversal, and on a gap in the event sequence, never per event batch.
 */
import type { EventRow, GraphElements } from '../lib/ui/graph-model'
import { api } from './api'

export interface StackShow {
  id: string
  name: string
  action: string
  status: string
  statusReason: string
  currentTraversalId: string | null
  /** seq of the stack's latest event */
  lastSeq: number
  createdAt: string
  updatedAt: string | null
  disableRollback: boolean
  timeoutMins: number
  tags: string[]
  parameters: Record<string, unknown>
  outputs?: Record<string, { value: unknown; description?: string; error?: string }>
}

export interface TraversalRow {
  id: string
  action: string
  startedBy: string
  startedAt: string
  endedAt: string | null
  outcome: string | null
  outcomeReason: string
  supersededBy: string | null
  failureReason: string | null
  nodeCount: number
  current: boolean
}

export interface TraversalMeta extends TraversalRow {
  stackLastSeq: number
  /** resource type -> the row ids of that type */
  types: Record<string, number[]>
}

export const EVENTS_PAGE = 5000

/** The GET paths of the reads below (the stack page's HTML starts the first load's by the same paths: components/EarlyReads.tsx). */
export const readPath = {
  stack: (stackId: string, withOutputs = false) => `/api/stacks/${stackId}${withOutputs ? '' : '?outputs=0'}`,
  traversals: (stackId: string) => `/api/stacks/${stackId}/traversals`,
  traversal: (stackId: string, traversalId: string) => `/api/stacks/${stackId}/traversals/${traversalId}`,
  graph: (stackId: string, traversalId: string) => `/api/stacks/${stackId}/traversals/${traversalId}/graph`,
  events: (stackId: string, after: number, traversal?: string) => {
    const q = new URLSearchParams({ after: String(after), limit: String(EVENTS_PAGE) })
    if (traversal) q.set('traversal', traversal)
    return `/api/stacks/${stackId}/events?${q}`
  },
}

/** What the live view's first load reads (useStackLive's `load`): the stack, its traversals, and the current traversal's meta, graph and events. */
export const firstLoadPaths = (stackId: string): string[] => [
  readPath.stack(stackId), readPath.traversals(stackId), readPath.traversal(stackId, 'current'), readPath.graph(stackId, 'current'), readPath.events(stackId, 0, 'current'),
]

export const fetchStack = async (stackId: string, withOutputs = false) => (await api<{ stack: StackShow }>('GET', readPath.stack(stackId, withOutputs))).stack

export const fetchTraversals = async (stackId: string) => (await api<{ traversals: TraversalRow[] }>('GET', readPath.traversals(stackId))).traversals

export const fetchTraversal = async (stackId: string, traversalId: string | 'current') =>
  (await api<{ traversal: TraversalMeta }>('GET', readPath.traversal(stackId, traversalId))).traversal

export const fetchGraph = async (stackId: string, traversalId: string) => (await fetchGraphOf(stackId, traversalId)).elements

/** A traversal's graph and which traversal it is (`current` is resolved by the server). */
export const fetchGraphOf = async (stackId: string, traversalId: string | 'current') =>
  api<{ traversalId: string; elements: GraphElements }>('GET', readPath.graph(stackId, traversalId))

/**
 * The current traversal's meta, graph and events in one round trip beside the
 * stack's own (the live view's first load), or null when there is none or a
 * new traversal started between the three answers.
 */
export async function fetchCurrent(stackId: string, mark: (name: string) => void = () => {}): Promise<{ meta: TraversalMeta; graph: GraphElements; ev: { events: EventRow[]; lastSeq: number } } | null> {
  try {
    const [meta, g, ev] = await Promise.all([
      fetchTraversal(stackId, 'current').finally(() => mark('traversal')),
      fetchGraphOf(stackId, 'current').finally(() => mark('graph')),
      fetchEvents(stackId, { after: 0, traversal: 'current' }).finally(() => mark('events')),
    ])
    return meta.id === g.traversalId && meta.id === ev.traversalId ? { meta, graph: g.elements, ev } : null
  } catch {
    return null
  }
}

/** hostname:pid of the workers the stack's events named (those ids only: at most 100 at a time). */
export async function fetchWorkers(stackId: string, ids: Iterable<string>): Promise<Map<string, string>> {
  const all = [...new Set(ids)].slice(-100)
  if (!all.length) return new Map()
  const r = await api<{ workers: { id: string; name: string }[] }>('GET', `/api/stacks/${stackId}/workers?ids=${all.join(',')}`)
  return new Map(r.workers.map((w) => [w.id, w.name]))
}

/** The worker ids events name (acting on a row, or holding a row another traversal waits for). */
export function workerIds(events: EventRow[]): string[] {
  const out = new Set<string>()
  for (const e of events) {
    if (typeof e.data?.worker === 'string') out.add(e.data.worker)
    if (typeof e.data?.holder === 'string') out.add(e.data.holder)
  }
  return [...out]
}

/**
 * Events after `after` (of one traversal, or all), every page of them; `lastSeq` is the stack's when the last
 * page was read. `traversal: 'current'` is resolved by the first page (`traversalId` says to which).
 */
export async function fetchEvents(stackId: string, opts: { after: number; traversal?: string }): Promise<{ events: EventRow[]; lastSeq: number; traversalId?: string | null }> {
  const out: EventRow[] = []
  let after = opts.after
  let lastSeq: number
  let traversal = opts.traversal
  for (;;) {
    const r = await api<{ events: EventRow[]; lastSeq: number; traversalId?: string | null }>('GET', readPath.events(stackId, after, traversal))
    out.push(...r.events)
    lastSeq = Math.max(r.lastSeq, r.events.at(-1)?.seq ?? 0)
    if (r.traversalId !== undefined) traversal = r.traversalId ?? undefined
    if (r.events.length < EVENTS_PAGE || !traversal && opts.traversal) break
    after = r.events.at(-1)!.seq
  }
  return { events: out, lastSeq, ...(opts.traversal ? { traversalId: traversal ?? null } : {}) }
}

/** Row id -> resource type, from the traversal's `types`. */
export function typesById(meta: TraversalMeta): Map<number, string> {
  const out = new Map<number, string>()
  for (const [type, ids] of Object.entries(meta.types)) for (const id of ids) out.set(id, type)
  return out
}
