/**
 * Where a phase's time above its critical path goes, read back from the
 * events the traversal stored (no instrumentation in the engine):
 *
 *   start  submit -> the first node of the critical path locked (the service
 *          call, timed on its own, then the NOTIFY, the claim and begin of the
 *          leaves);
 *   path   along the critical path, the time above its actions: each node's
 *          span from its last input's finish to its own finish, less the
 *          action delay D for a node that acted (its finish is a resource
 *          event; a no-op's is a node event) — the finishes, the hops to the
 *          next node and any lateness of the timer;
 *   end    the last finish -> the stack's COMPLETE event (kiln_settle), and
 *          -> the bench noticing it (the NOTIFY kiln_stack and a read).
 *
 * The critical path is walked back from the node that finished last, each
 * step to the predecessor that finished last. Event times are each step's
 * transaction start (now(), to the millisecond): a node's DONE event is
 * stamped when its finish began, right after its action ended, and the
 * successor it began in that finish is stamped RUNNING at the same instant.
 */
import type pg from 'pg'
import { indexGraph } from '../lib/engine/graph'
import type { TraversalGraph } from '../lib/engine/types'

export interface Breakdown {
  /** nodes on the critical path (with an action of D each: `acted`) */
  pathNodes: number
  acted: number
  startMs: number
  /** of startMs, the service call (submit -> it returned) */
  serviceMs: number
  /** the path's time above its actions, in all and per node (median) */
  pathOverheadMs: number
  perNodeMedianMs: number
  /** of pathOverheadMs, the first node's (its lock -> its finish, less D: the worker loading the traversal, the action's start) */
  firstNodeMs: number
  settleMs: number
  noticedMs: number
}

interface NodeTimes {
  /** when its row was locked for it (none: a no-op completed inline) */
  running: number | null
  done: number
  /** its finish recorded a resource action (a no-op finishes as a node event) */
  acted: boolean
}

export async function criticalPathBreakdown(
  pool: pg.Pool, traversalId: string, delayS: number, submittedAt: number, serviceMs: number, noticedAt: number,
): Promise<Breakdown | null> {
  const { rows: tr } = await pool.query('SELECT graph FROM traversal_graph WHERE traversal_id = $1', [traversalId])
  if (!tr[0]) return null
  const index = indexGraph(tr[0].graph as TraversalGraph)
  const { rows: evs } = await pool.query(
    `SELECT extract(epoch FROM created_at) * 1000 AS at, kind, data->>'rid' AS rid, data->>'update' AS upd, data->>'state' AS state
       FROM event
      WHERE traversal_id = $1 AND kind IN ('node', 'resource')
        AND ((data->>'state' = 'RUNNING' AND data->>'lock' = 'acquired') OR data->>'state' = 'DONE')
      ORDER BY seq`,
    [traversalId],
  )
  const { rows: st } = await pool.query(
    `SELECT extract(epoch FROM created_at) * 1000 AS at FROM event WHERE traversal_id = $1 AND kind = 'stack' AND status = 'COMPLETE' ORDER BY seq DESC LIMIT 1`,
    [traversalId],
  )
  const times = new Map<string, NodeTimes>()
  for (const e of evs) {
    const id = `${e.rid}:${e.upd === 'true' ? 'u' : 'c'}`
    const at = Number(e.at)
    const t = times.get(id) ?? { running: null, done: Number.NaN, acted: false }
    // The first lock counts: a replacement begins again (its new row), but a
    // state-only type's create starts before that second lock (a head start,
    // lib/engine/check-resource.ts), so the node's span runs from the first.
    if (e.state === 'RUNNING') t.running ??= at
    else {
      t.done = at
      t.acted = e.kind === 'resource'
    }
    times.set(id, t)
  }
  const finished = [...times.entries()].filter(([, t]) => Number.isFinite(t.done))
  if (!finished.length || !st[0]) return null

  // Walk back from the last finish, each step to the predecessor that finished last.
  let [id, last] = finished.reduce((a, b) => (b[1].done > a[1].done ? b : a))
  const path: [string, NodeTimes][] = [[id, last]]
  for (;;) {
    const preds = (index.requires.get(id) ?? []).map((p) => [p, times.get(p)] as const).filter((p): p is [string, NodeTimes] => !!p[1] && Number.isFinite(p[1].done))
    if (!preds.length) break
    ;[id, last] = preds.reduce((a, b) => (b[1].done > a[1].done ? b : a))
    path.push([id, last])
  }
  path.reverse()

  const D = delayS * 1000
  const first = path[0]![1]
  const perNode: number[] = []
  let acted = 0
  for (const [i, [, t]] of path.entries()) {
    // A node's span: from its last input's finish (or its own lock, for the first) to its finish.
    const from = i === 0 ? (t.running ?? t.done) : path[i - 1]![1].done
    if (t.acted) acted++
    perNode.push(t.done - from - (t.acted ? D : 0))
  }
  const sorted = [...perNode].sort((a, b) => a - b)
  const end = path.at(-1)![1].done
  const settled = Number(st[0].at)
  return {
    pathNodes: path.length,
    acted,
    startMs: round((first.running ?? first.done) - submittedAt),
    serviceMs: round(serviceMs),
    pathOverheadMs: round(perNode.reduce((a, b) => a + b, 0)),
    perNodeMedianMs: round(sorted[Math.floor(sorted.length / 2)]!),
    firstNodeMs: round(perNode[0]!),
    settleMs: round(settled - end),
    noticedMs: round(noticedAt - settled),
  }
}

/** Rounded to `digits` decimals (the bench's numbers; 0.1 ms for the breakdown). */
export function round(v: number, digits = 1): number {
  const f = 10 ** digits
  return Math.round(v * f) / f
}

export function formatBreakdown(b: Breakdown): string {
  return `    above the critical path: start ${b.startMs} ms (submit -> first node locked; the service call ${b.serviceMs} ms); path ${b.pathOverheadMs} ms over ${b.pathNodes} nodes` +
    ` (${b.acted} acting; the first ${b.firstNodeMs} ms; median ${b.perNodeMedianMs} ms per node: finish, hop, timer); end ${b.settleMs} ms (last finish -> COMPLETE) + ${b.noticedMs} ms (-> bench notified)`
}
