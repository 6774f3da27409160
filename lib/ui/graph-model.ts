/**
 * What the stack page draws: one display node per resource row of a
 * traversal, folded from the stored graph plus the traversal's events in seq
 * order. Pure (no DOM, no I/O), so the live view, replay, the history view
 * and the tests all use the same fold.
 *
 * The stored graph has a node per (graph key, update|cleanup). A graph key is
 * the row the traversal was planned with; when that row is replaced, the
 * replacement is a new row (and a new display node linked to the old one)
 * that takes over the key's update work, while the old row's cleanup node
 * later deletes it.
 */

import { driftOfEvent, type DriftMark } from './drift-mark'

export type NodeState =
  | 'not-started'
  | 'waiting'
  | 'ready'
  | 'retriggered'
  | 'running'
  | 'blocked'
  | 'replaced'
  | 'deleting'
  | 'complete'
  | 'deleted'
  | 'failed'
  | 'skipped'

export const NODE_STATES: { state: NodeState; label: string; explain: string }[] = [
  { state: 'not-started', label: 'not started', explain: 'the traversal has not reached it yet' },
  { state: 'waiting', label: 'waiting', explain: 'some of its inputs have reported (k of n)' },
  { state: 'ready', label: 'ready', explain: 'all inputs reported; queued for a worker' },
  { state: 'running', label: 'running', explain: 'a worker holds the row lock and acts on it' },
  { state: 'blocked', label: 'blocked', explain: 'the row is locked by an older traversal; it will be retriggered' },
  { state: 'retriggered', label: 'retriggered', explain: 'the older traversal let go and handed the node to this one' },
  { state: 'replaced', label: 'replaced', explain: 'a new row replaces this one; the old row is deleted after its dependents moved' },
  { state: 'deleting', label: 'cleanup', explain: 'cleanup node: the row is being deleted' },
  { state: 'complete', label: 'complete', explain: 'done in this traversal' },
  { state: 'deleted', label: 'deleted', explain: 'cleanup done: the row is gone' },
  { state: 'failed', label: 'failed', explain: 'the action failed (reason in the side panel)' },
  { state: 'skipped', label: 'skipped', explain: 'never run: the traversal failed, was cancelled or was superseded first' },
]

/** States in which a node still has work ahead of it in a running traversal. */
export const PENDING_STATES: ReadonlySet<NodeState> = new Set(['not-started', 'waiting', 'ready', 'retriggered', 'blocked'])
/** States in which a worker acts on the node now. */
export const ACTIVE_STATES: ReadonlySet<NodeState> = new Set(['running', 'deleting'])

export interface GraphElements {
  nodes: { data: { id: string; rid: number; kind: 'update' | 'cleanup'; name: string; state?: string; satisfied?: number; required?: number } }[]
  edges: { data: { id: string; source: string; target: string } }[]
}

export interface EventRow {
  seq: number
  traversalId: string | null
  kind: string
  resourceId: number | null
  resourceName: string | null
  action: string | null
  status: string | null
  reason: string
  data: Record<string, unknown> | null
  at: string
}

export interface HistoryEntry {
  seq: number
  at: string
  state: NodeState | null
  /** the event, for describing it in plain words (lib/ui/event-text.ts) */
  event: EventRow
}

export interface DisplayNode {
  id: string
  rowId: number
  name: string
  type: string
  /** 'cleanup': the row is only in this traversal to be deleted */
  kind: 'update' | 'cleanup'
  state: NodeState
  satisfied: number | null
  required: number | null
  /** the worker (id) acting on the row now */
  worker: string | null
  /** the worker (id) that acted on it last in this traversal */
  lastWorker: string | null
  leaseExpiresAt: string | null
  /** parked: waiting (for a signal, a timer) with its row locked and no worker; until when at the latest */
  parkedUntil: string | null
  blockedBy: string | null
  /** the worker holding the row's lock for the older traversal, when blocked */
  blockedHolder: string | null
  wasBlocked: boolean
  retriggered: boolean
  replaces: number | null
  replacedBy: number | null
  /** the row's own action and status, from its resource events */
  rowAction: string | null
  rowStatus: string | null
  /** the latest event that changed the node (its reason in plain words: event-text.ts) */
  last: EventRow | null
  progress: number | null
  startedAt: number | null
  endedAt: number | null
  history: HistoryEntry[]
  /** what the latest current drift check found (lib/ui/drift.ts); null: not checked, or no longer current */
  drift: DriftMark | null
}

export interface DisplayEdge {
  id: string
  /** the dependency (runs first) */
  source: string
  /** the dependent */
  target: string
  kind: 'depends' | 'replaces'
}

export type TraversalOutcome = 'COMPLETE' | 'FAILED' | 'CANCELLED' | 'SUPERSEDED'

export interface TraversalEnd {
  outcome: TraversalOutcome
  reason: string
  at: string
  seq: number
  supersededBy: string | null
}

export interface GraphModel {
  traversalId: string
  nodes: Map<string, DisplayNode>
  edges: DisplayEdge[]
  /** graph key (planned row id) + update flag -> display node now doing that key's work */
  keys: Map<string, string>
  /** the last stack event seq folded in (events of other traversals move it too) */
  lastSeq: number
  /** when the traversal's start event was folded in */
  startedAt: number | null
  /** how the traversal ended, once its events say so */
  end: TraversalEnd | null
}

export const nodeId = (rowId: number) => `r${rowId}`
const keyOf = (rid: number, update: boolean) => `${rid}:${update ? 'u' : 'c'}`

function blankNode(rowId: number, name: string, type: string, kind: 'update' | 'cleanup'): DisplayNode {
  return {
    id: nodeId(rowId), rowId, name, type, kind, state: 'not-started', satisfied: null, required: null,
    worker: null, lastWorker: null, leaseExpiresAt: null, parkedUntil: null, blockedBy: null, blockedHolder: null, wasBlocked: false, retriggered: false,
    replaces: null, replacedBy: null, rowAction: null, rowStatus: null, last: null, progress: null, startedAt: null, endedAt: null, history: [], drift: null,
  }
}

/**
 * The structure of a traversal with every node not started (replay starts
 * here). `types` gives each row's resource type by row id.
 */
export function initialModel(traversalId: string, graph: GraphElements, types: ReadonlyMap<number, string> = new Map()): GraphModel {
  const hasUpdate = new Set(graph.nodes.filter((n) => n.data.kind === 'update').map((n) => n.data.rid))
  const nodes = new Map<string, DisplayNode>()
  const keys = new Map<string, string>()
  for (const { data } of graph.nodes) {
    const kind = data.kind === 'update' || !hasUpdate.has(data.rid) ? data.kind : null
    keys.set(keyOf(data.rid, data.kind === 'update'), nodeId(data.rid))
    if (!kind || nodes.has(nodeId(data.rid))) continue
    const n = blankNode(data.rid, data.name, types.get(data.rid) ?? '', kind)
    n.required = data.required ?? null
    n.satisfied = data.required !== undefined ? 0 : null
    nodes.set(n.id, n)
  }
  const edges: DisplayEdge[] = []
  const seen = new Set<string>()
  for (const { data } of graph.edges) {
    // stored: source waits for target; drawn: dependency -> dependent
    const [srid, skind] = data.source.split(':')
    const [trid, tkind] = data.target.split(':')
    const from = nodeId(Number(trid))
    const to = nodeId(Number(srid))
    if (from === to) continue
    const src = nodes.get(from)
    const dst = nodes.get(to)
    if (!src || !dst) continue
    // an edge is drawn between the kinds each row is shown as
    if ((src.kind === 'update') !== (tkind === 'u') || (dst.kind === 'update') !== (skind === 'u')) continue
    const id = `${from}->${to}`
    if (seen.has(id)) continue
    seen.add(id)
    edges.push({ id, source: from, target: to, kind: 'depends' })
  }
  return { traversalId, nodes, edges, keys, lastSeq: 0, startedAt: null, end: null }
}

const STATE_OF: Record<string, NodeState> = {
  WAITING: 'waiting', READY: 'ready', RUNNING: 'running', BLOCKED: 'blocked', DONE: 'complete', FAILED: 'failed', SKIPPED: 'skipped',
}

function setState(n: DisplayNode, s: NodeState, ev: EventRow) {
  const t = Date.parse(ev.at)
  if (s === 'running' || s === 'deleting') n.startedAt ??= t
  if (s === 'complete' || s === 'deleted' || s === 'failed' || s === 'skipped') n.endedAt = t
  n.state = s
}

function record(n: DisplayNode, ev: EventRow, state: NodeState | null) {
  n.history.push({ seq: ev.seq, at: ev.at, state, event: ev })
  n.last = ev
}

/** The traversal ended: nodes that never started will not run now (running ones still finish). */
function endTraversal(m: GraphModel, end: TraversalEnd, changed: Set<string>) {
  m.end = end
  if (end.outcome === 'COMPLETE') return
  const ev: EventRow = { seq: end.seq, traversalId: m.traversalId, kind: 'traversal', resourceId: null, resourceName: null, action: null, status: end.outcome, reason: end.reason, data: { skipped: end.outcome }, at: end.at }
  for (const n of m.nodes.values()) {
    if (!PENDING_STATES.has(n.state)) continue
    setState(n, 'skipped', ev)
    record(n, ev, 'skipped')
    changed.add(n.id)
  }
}

/** A stack or traversal event of this traversal that ends it, as a TraversalEnd (else null). */
function endOf(ev: EventRow): TraversalEnd | null {
  const d = ev.data ?? {}
  if (ev.kind === 'traversal' && ev.status === 'SUPERSEDED')
    return { outcome: 'SUPERSEDED', reason: ev.reason, at: ev.at, seq: ev.seq, supersededBy: typeof d.superseded_by === 'string' ? d.superseded_by : null }
  if (ev.kind !== 'stack' || (ev.status !== 'COMPLETE' && ev.status !== 'FAILED')) return null
  const outcome: TraversalOutcome = ev.status === 'COMPLETE' ? 'COMPLETE' : d.cancelled === true ? 'CANCELLED' : 'FAILED'
  return { outcome, reason: ev.reason, at: ev.at, seq: ev.seq, supersededBy: null }
}

/**
 * Applies events (in seq order) to the model, in place. Returns the ids of the
 * display nodes that changed, so a view can restyle only those.
 */
export function applyEvents(m: GraphModel, events: EventRow[], types?: ReadonlyMap<number, string>): Set<string> {
  const changed = new Set<string>()
  for (const ev of events) {
    if (ev.seq <= m.lastSeq) continue
    m.lastSeq = ev.seq
    if (ev.traversalId !== m.traversalId) continue
    if (ev.kind === 'stack' && ev.status === 'IN_PROGRESS') m.startedAt ??= Date.parse(ev.at)
    const end = endOf(ev)
    if (end) {
      if (!m.end) endTraversal(m, end, changed)
      continue
    }
    const d = ev.data ?? {}
    if (typeof d.rid !== 'number' && ev.kind !== 'lock') continue
    const update = d.update !== false
    const key = typeof d.rid === 'number' ? keyOf(d.rid, update) : null
    // Which display node: the acting row when the event names it, else the node doing the key's work.
    let id = key ? m.keys.get(key) : undefined
    if (ev.resourceId !== null && m.nodes.has(nodeId(ev.resourceId)) && (ev.resourceId !== d.rid || !id)) id = nodeId(ev.resourceId)
    if (!id) continue
    const n = m.nodes.get(id)
    if (!n) continue
    if (ev.kind === 'resource' && ev.resourceId === n.rowId) {
      n.rowAction = ev.action
      n.rowStatus = ev.status
    }
    // A drift check's node names what it found.
    const found = driftOfEvent(ev)
    if (found) {
      n.drift = found
      changed.add(n.id)
    }

    if (typeof d.replaced_by === 'number') {
      replace(m, n, d.replaced_by, ev, key, types)
      changed.add(n.id)
      changed.add(nodeId(d.replaced_by))
      continue
    }

    // A cleanup node of a row that stays (not replaced, still in the template) is a no-op: don't show it.
    if (!update && n.kind === 'update' && n.state !== 'replaced' && n.replacedBy === null) continue

    if (ev.kind === 'lock' && d.lock === 'broken') {
      n.worker = null
      record(n, ev, null)
      changed.add(n.id)
      continue
    }
    if (ev.kind === 'progress') {
      if (typeof d.fraction === 'number') n.progress = d.fraction
      record(n, ev, null)
      changed.add(n.id)
      continue
    }
    let s: NodeState | null = typeof d.state === 'string' ? (STATE_OF[d.state] ?? null) : null
    if (s === null) continue
    if (s === 'ready' && d.retriggered === true) {
      s = 'retriggered'
      n.retriggered = true
    }
    if (!update || n.state === 'replaced' || n.kind === 'cleanup') {
      // the row's cleanup node: deleting it
      if (s === 'running') s = 'deleting'
      else if (s === 'complete') s = 'deleted'
    }
    if (s === 'blocked') {
      n.wasBlocked = true
      n.blockedBy = typeof d.blocked_by === 'string' ? d.blocked_by : null
      n.blockedHolder = typeof d.holder === 'string' ? d.holder : null
    }
    if (typeof d.satisfied === 'number') n.satisfied = d.satisfied
    if (typeof d.required === 'number') n.required = d.required
    // A parked node still holds its row, but no worker acts on it until it is woken.
    const parked = d.lock === 'parked'
    n.parkedUntil = !parked ? null : typeof d.until === 'string' ? d.until : n.parkedUntil
    if (parked) n.worker = null
    else if (s === 'running' || s === 'deleting') {
      if (typeof d.worker === 'string') n.worker = n.lastWorker = d.worker
      if (typeof d.lease_expires_at === 'string') n.leaseExpiresAt = d.lease_expires_at
    } else if (d.lock === 'released' || s === 'complete' || s === 'deleted' || s === 'failed') n.worker = null
    // a row once replaced keeps that label until its cleanup starts; a node the traversal's end skipped stays skipped
    const keep = (n.state === 'replaced' && (s === 'waiting' || s === 'ready')) || (n.state === 'skipped' && PENDING_STATES.has(s))
    if (!keep) setState(n, s, ev)
    record(n, ev, s)
    changed.add(n.id)
  }
  return changed
}

/** The old row stays as its own node; the replacement is a new one taking over the key's update work. */
function replace(m: GraphModel, n: DisplayNode, newRow: number, ev: EventRow, key: string | null, types?: ReadonlyMap<number, string>) {
  setState(n, 'replaced', ev)
  n.replacedBy = newRow
  n.worker = null
  record(n, ev, 'replaced')
  const nn = blankNode(newRow, n.name, types?.get(newRow) ?? n.type, 'update')
  nn.replaces = n.rowId
  nn.state = 'ready'
  record(nn, ev, 'ready')
  m.nodes.set(nn.id, nn)
  const ids = new Set(m.edges.map((e) => e.id))
  for (const e of m.edges.filter((e) => e.kind === 'depends' && (e.source === n.id || e.target === n.id))) {
    const copy = { ...e, source: e.source === n.id ? nn.id : e.source, target: e.target === n.id ? nn.id : e.target }
    copy.id = `${copy.source}->${copy.target}`
    if (!ids.has(copy.id)) m.edges.push(copy)
  }
  m.edges.push({ id: `${n.id}=>${nn.id}`, source: n.id, target: nn.id, kind: 'replaces' })
  if (key) m.keys.set(key, nn.id)
}

/** Nodes that count as done for progress (a failed node is finished too). */
/**
 * The hook of the environment a parked node waits at (pre-create, …), from
 * the reason of its park; null when it is not parked at one. Continue clears
 * it, as `openstack stack hook clear` does.
 */
export function hookOf(n: Pick<DisplayNode, 'parkedUntil' | 'last'>): string | null {
  if (!n.parkedUntil || !n.last) return null
  return /paused until Hook (pre-(?:create|update|delete)) is cleared/.exec(n.last.reason)?.[1] ?? null
}

export function isDone(s: NodeState): boolean {
  return s === 'complete' || s === 'deleted' || s === 'skipped' || s === 'replaced' || s === 'failed'
}

/** How many nodes are in each state. */
export function stateCounts(m: GraphModel): Partial<Record<NodeState, number>> {
  const out: Partial<Record<NodeState, number>> = {}
  for (const n of m.nodes.values()) out[n.state] = (out[n.state] ?? 0) + 1
  return out
}

/** done / total for the progress bar: the same nodes the graph draws. */
export function progressOf(m: GraphModel): { done: number; total: number } {
  let done = 0
  for (const n of m.nodes.values()) if (isDone(n.state)) done++
  return { done, total: m.nodes.size }
}

/**
 * The model as of `untilMs` (epoch ms): the fold of the events up to that
 * time. Replay by time and deep links (`?t=`) use it.
 */
export function modelAt(traversalId: string, graph: GraphElements, types: ReadonlyMap<number, string>, events: EventRow[], untilMs: number): GraphModel {
  const m = initialModel(traversalId, graph, types)
  let i = 0
  while (i < events.length && Date.parse(events[i]!.at) <= untilMs) i++
  applyEvents(m, events.slice(0, i), types)
  return m
}
