/**
 * What the stack page draws: one display node per resource row of a
 * traversal, folded from the stored graph plus the traversal's events in seq
 * order. Pure (no DOM, no I/O), so the live view, the replay slider and the
 * tests all use the same fold.
 *
 * The stored graph has a node per (graph key, update|cleanup). A graph key is
 * the row the traversal was planned with; when that row is replaced, the
 * replacement is a new row (and a new display node linked to the old one)
 * that takes over the key's update work, while the old row's cleanup node
 * later deletes it.
 */

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
  { state: 'skipped', label: 'skipped', explain: 'not run because the traversal failed or was cancelled' },
]

export interface GraphElements {
  nodes: { data: { id: string; rid: number; kind: 'update' | 'cleanup'; name: string; state?: string; satisfied?: number; required?: number } }[]
  edges: { data: { id: string; source: string; target: string } }[]
}

export interface ResourceRow {
  id: number
  name: string
  type: string
  action: string
  status: string
  statusReason: string
  physicalId: string | null
  replaces: number | null
  replacedBy: number | null
  lock: { worker: string; workerName: string | null; traversalId: string | null; leaseExpiresAt: string | null } | null
  properties?: Record<string, unknown> | null
  attributes?: Record<string, unknown>
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
  worker: string | null
  leaseExpiresAt: string | null
  blockedBy: string | null
  wasBlocked: boolean
  retriggered: boolean
  replaces: number | null
  replacedBy: number | null
  reason: string
  progress: number | null
  startedAt: number | null
  endedAt: number | null
  history: { seq: number; at: string; state: NodeState | null; reason: string }[]
}

export interface DisplayEdge {
  id: string
  /** the dependency (runs first) */
  source: string
  /** the dependent */
  target: string
  kind: 'depends' | 'replaces'
}

export interface GraphModel {
  traversalId: string
  nodes: Map<string, DisplayNode>
  edges: DisplayEdge[]
  /** graph key (planned row id) + update flag -> display node now doing that key's work */
  keys: Map<string, string>
  lastSeq: number
}

const nodeId = (rowId: number) => `r${rowId}`
const keyOf = (rid: number, update: boolean) => `${rid}:${update ? 'u' : 'c'}`

function blankNode(rowId: number, name: string, type: string, kind: 'update' | 'cleanup'): DisplayNode {
  return {
    id: nodeId(rowId), rowId, name, type, kind, state: 'not-started', satisfied: null, required: null,
    worker: null, leaseExpiresAt: null, blockedBy: null, wasBlocked: false, retriggered: false,
    replaces: null, replacedBy: null, reason: '', progress: null, startedAt: null, endedAt: null, history: [],
  }
}

/** The structure of a traversal with every node not started (the replay starts here). */
export function initialModel(traversalId: string, graph: GraphElements, rows: ResourceRow[]): GraphModel {
  const rowById = new Map(rows.map((r) => [r.id, r]))
  const hasUpdate = new Set(graph.nodes.filter((n) => n.data.kind === 'update').map((n) => n.data.rid))
  const nodes = new Map<string, DisplayNode>()
  const keys = new Map<string, string>()
  for (const { data } of graph.nodes) {
    const kind = data.kind === 'update' || !hasUpdate.has(data.rid) ? data.kind : null
    keys.set(keyOf(data.rid, data.kind === 'update'), nodeId(data.rid))
    if (!kind || nodes.has(nodeId(data.rid))) continue
    const n = blankNode(data.rid, data.name, rowById.get(data.rid)?.type ?? '', kind)
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
  return { traversalId, nodes, edges, keys, lastSeq: 0 }
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

/**
 * Applies events (in seq order) to the model, in place. Returns the ids of the
 * display nodes that changed, so a view can restyle only those.
 */
export function applyEvents(m: GraphModel, events: EventRow[], rows?: Map<number, ResourceRow>): Set<string> {
  const changed = new Set<string>()
  for (const ev of events) {
    if (ev.seq <= m.lastSeq) continue
    m.lastSeq = ev.seq
    if (ev.traversalId !== m.traversalId) continue
    const d = ev.data ?? {}
    if (typeof d.rid !== 'number' && ev.kind !== 'lock') continue
    const update = d.update !== false
    const key = typeof d.rid === 'number' ? keyOf(d.rid, update) : null
    // Which display node: the acting row when the event names it, else the node doing the key's work.
    let id = key ? m.keys.get(key) : undefined
    if (ev.resourceId !== null && m.nodes.has(nodeId(ev.resourceId)) && (ev.resourceId !== d.rid || !id)) id = nodeId(ev.resourceId)
    if (!id) continue
    let n = m.nodes.get(id)
    if (!n) continue

    if (typeof d.replaced_by === 'number') {
      // The old row stays as its own node; the replacement is a new one taking over the key's update work.
      setState(n, 'replaced', ev)
      n.replacedBy = d.replaced_by
      n.reason = ev.reason
      n.worker = null
      n.history.push({ seq: ev.seq, at: ev.at, state: 'replaced', reason: ev.reason })
      changed.add(n.id)
      const nn = blankNode(d.replaced_by, n.name, rows?.get(d.replaced_by)?.type ?? n.type, 'update')
      nn.replaces = n.rowId
      nn.state = 'ready'
      nn.history.push({ seq: ev.seq, at: ev.at, state: 'ready', reason: `replaces #${n.rowId}` })
      m.nodes.set(nn.id, nn)
      for (const e of m.edges.filter((e) => e.kind === 'depends' && (e.source === n!.id || e.target === n!.id))) {
        const copy = { ...e, source: e.source === n.id ? nn.id : e.source, target: e.target === n.id ? nn.id : e.target }
        copy.id = `${copy.source}->${copy.target}`
        if (!m.edges.some((x) => x.id === copy.id)) m.edges.push(copy)
      }
      m.edges.push({ id: `${n.id}=>${nn.id}`, source: n.id, target: nn.id, kind: 'replaces' })
      if (key) m.keys.set(key, nn.id)
      changed.add(nn.id)
      continue
    }

    // A cleanup node of a row that stays (not replaced, still in the template) is a no-op: don't show it.
    if (!update && n.kind === 'update' && n.state !== 'replaced' && n.replacedBy === null) continue

    let s: NodeState | null = typeof d.state === 'string' ? (STATE_OF[d.state] ?? null) : null
    if (ev.kind === 'lock' && d.lock === 'broken') {
      n.reason = ev.reason
      n.worker = null
      n.history.push({ seq: ev.seq, at: ev.at, state: null, reason: `lock broken: ${ev.reason}` })
      changed.add(n.id)
      continue
    }
    if (ev.kind === 'progress') {
      if (typeof d.fraction === 'number') n.progress = d.fraction
      n.history.push({ seq: ev.seq, at: ev.at, state: null, reason: ev.reason })
      changed.add(n.id)
      continue
    }
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
    }
    if (typeof d.satisfied === 'number') n.satisfied = d.satisfied
    if (typeof d.required === 'number') n.required = d.required
    if (s === 'running' || s === 'deleting') {
      n.worker = typeof d.worker === 'string' ? d.worker : null
      n.leaseExpiresAt = typeof d.lease_expires_at === 'string' ? d.lease_expires_at : null
    } else if (d.lock === 'released') n.worker = null
    n.reason = ev.reason
    // a row once replaced keeps that label until its cleanup starts
    if (!(n.state === 'replaced' && (s === 'waiting' || s === 'ready'))) setState(n, s, ev)
    n.history.push({ seq: ev.seq, at: ev.at, state: s, reason: ev.reason })
    changed.add(n.id)
  }
  return changed
}

/** Nodes in a finished-or-running state that count as done for progress. */
export function isDone(s: NodeState): boolean {
  return s === 'complete' || s === 'deleted' || s === 'skipped' || s === 'replaced'
}

export interface PathEstimate {
  /** display node ids on the longest remaining path, dependency first */
  path: string[]
  /** seconds the remaining path is expected to take */
  secondsLeft: number | null
  done: number
  total: number
}

/**
 * The critical path: the chain with the most remaining work, weighting
 * unfinished nodes by the mean duration of finished ones (finished nodes weigh
 * nothing). The estimate of time left is that path's weight, less the time the
 * running node on it has already spent.
 */
export function criticalPath(m: GraphModel, now: number): PathEstimate {
  const durations: number[] = []
  let done = 0
  for (const n of m.nodes.values()) {
    if (isDone(n.state) || n.state === 'failed') done++
    if (n.startedAt !== null && n.endedAt !== null && n.endedAt >= n.startedAt) durations.push((n.endedAt - n.startedAt) / 1000)
  }
  const mean = durations.length ? durations.reduce((a, b) => a + b, 0) / durations.length : null
  const weight = (n: DisplayNode) => {
    if (isDone(n.state) || n.state === 'failed') return 0
    const w = mean ?? 1
    return n.state === 'running' && n.startedAt !== null ? Math.max(0, w - (now - n.startedAt) / 1000) : w
  }
  const preds = new Map<string, string[]>()
  const succs = new Map<string, string[]>()
  for (const e of m.edges) {
    if (e.kind !== 'depends' || !m.nodes.has(e.source) || !m.nodes.has(e.target)) continue
    ;(preds.get(e.target) ?? preds.set(e.target, []).get(e.target)!).push(e.source)
    ;(succs.get(e.source) ?? succs.set(e.source, []).get(e.source)!).push(e.target)
  }
  // Kahn's order, then longest path by weight.
  const indeg = new Map<string, number>()
  for (const id of m.nodes.keys()) indeg.set(id, preds.get(id)?.length ?? 0)
  const queue = [...m.nodes.keys()].filter((id) => indeg.get(id) === 0)
  const best = new Map<string, { w: number; prev: string | null }>()
  for (let i = 0; i < queue.length; i++) {
    const id = queue[i]!
    const n = m.nodes.get(id)!
    let bw = 0
    let prev: string | null = null
    for (const p of preds.get(id) ?? []) {
      const b = best.get(p)
      if (b && b.w > bw) {
        bw = b.w
        prev = p
      }
    }
    best.set(id, { w: bw + weight(n), prev })
    for (const s of succs.get(id) ?? []) {
      indeg.set(s, indeg.get(s)! - 1)
      if (indeg.get(s) === 0) queue.push(s)
    }
  }
  let end: string | null = null
  let endW = 0
  for (const [id, b] of best) if (b.w > endW) [end, endW] = [id, b.w]
  const path: string[] = []
  for (let cur = end; cur; cur = best.get(cur)?.prev ?? null) path.unshift(cur)
  return { path, secondsLeft: mean === null && done === 0 ? null : endW, done, total: m.nodes.size }
}
