/**
 * The critical path of a running traversal and the time it has left. Pure.
 *
 * The critical path is the chain with the most remaining work, weighting each
 * unfinished node by the mean duration of the nodes that actually ran (a node
 * that was already at its template finishes without running and says nothing
 * about how long work takes). The estimate is that path's weight, less the
 * time its running node has already spent. No estimate is given before enough
 * nodes ran to make one, nor once nothing is left but the traversal's own
 * finish: "0 s left" would be a guess presented as a fact.
 */
import { isDone, type DisplayNode, type GraphModel } from './graph-model'

export interface PathEstimate {
  /** display node ids on the longest remaining path, dependency first */
  path: string[]
  /** seconds the remaining path is expected to take; null: not known yet */
  secondsLeft: number | null
  /** why there is no estimate: too few nodes ran yet, or only the finish is left */
  pending: 'estimating' | 'finishing' | null
  done: number
  total: number
}

/** Nodes that must have run before their mean duration is trusted. */
const MIN_SAMPLES = 2

export function criticalPath(m: GraphModel, now: number): PathEstimate {
  const durations: number[] = []
  let done = 0
  for (const n of m.nodes.values()) {
    if (isDone(n.state)) done++
    if (n.startedAt !== null && n.endedAt !== null && n.endedAt >= n.startedAt && (n.state === 'complete' || n.state === 'deleted' || n.state === 'replaced'))
      durations.push((n.endedAt - n.startedAt) / 1000)
  }
  const total = m.nodes.size
  if (m.end) return { path: [], secondsLeft: null, pending: null, done, total }
  if (done === total) return { path: [], secondsLeft: null, pending: 'finishing', done, total }
  const mean = durations.length ? durations.reduce((a, b) => a + b, 0) / durations.length : null
  const weight = (n: DisplayNode) => {
    if (isDone(n.state)) return 0
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
  const known = durations.length >= Math.min(MIN_SAMPLES, total)
  return { path, secondsLeft: known ? endW : null, pending: known ? null : 'estimating', done, total }
}
