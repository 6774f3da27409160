/**
 * Building a traversal graph (Heat's `_update_or_store_resources` +
 * `_compute_convg_dependencies`), as an ordered list of small steps:
 *
 *   1. chooseRows      bind each resource name of the new template to its best
 *                      existing row, or ask for a new INIT row
 *   2. (caller)        insert the new rows, getting their ids
 *   3. buildGraph      update nodes + their edges from the template's
 *                      dependencies; cleanup nodes for every pre-existing row,
 *                      ordered by what each row required when last acted on
 *   4. indexGraph      predecessor / successor maps, leaves, roots
 *
 * The graph never changes during a traversal; a replacement impersonates the
 * node of the row it replaces (see lib/engine/check-resource.ts).
 */
import type { ExistingRow, GraphIndex, GraphNode, NodeId, TraversalGraph } from './types'
import { nodeId, parseNodeId } from './types'

/**
 * Heat's `_get_best_existing_rsrc_db` score: prefer a row already at the
 * target template (+10: rolling back to it), then one at the previous template
 * (+5); avoid replaced rows (−1), FAILED rows (−30) and rows being deleted (−50).
 * Ties go to the most recently updated row.
 */
export function rowScore(row: ExistingRow, prevTemplateId: string | null, newTemplateId: string): number {
  let score = 0
  if (row.status === 'FAILED') score -= 30
  if (row.action === 'DELETE') score -= 50
  if (row.replacedBy !== null) score -= 1
  if (prevTemplateId !== null && row.currentTemplateId === prevTemplateId) score += 5
  if (row.currentTemplateId === newTemplateId) score += 10
  return score
}

export interface RowChoice {
  /** name -> chosen existing row id */
  bound: Map<string, number>
  /** names that need a new INIT row, in the order to insert them */
  missing: string[]
}

/**
 * Step 1. `existing` must not contain DELETE_COMPLETE rows (they are gone as far
 * as a new traversal is concerned; a name whose only row was deleted gets a new row).
 */
export function chooseRows(names: string[], existing: ExistingRow[], prevTemplateId: string | null, newTemplateId: string): RowChoice {
  const byName = new Map<string, ExistingRow[]>()
  for (const row of existing) {
    const list = byName.get(row.name)
    if (list) list.push(row)
    else byName.set(row.name, [row])
  }
  const bound = new Map<string, number>()
  const missing: string[] = []
  for (const name of names) {
    const candidates = byName.get(name)
    if (!candidates?.length) {
      missing.push(name)
      continue
    }
    let best = candidates[0]!
    let bestScore = rowScore(best, prevTemplateId, newTemplateId)
    for (const row of candidates.slice(1)) {
      const s = rowScore(row, prevTemplateId, newTemplateId)
      if (s > bestScore || (s === bestScore && (row.updatedAt > best.updatedAt || (row.updatedAt === best.updatedAt && row.id > best.id)))) {
        best = row
        bestScore = s
      }
    }
    bound.set(name, best.id)
  }
  return { bound, missing }
}

/**
 * Step 3. `rows` maps every resource name of the new template to its row id
 * (existing or just inserted); `dependsOn` is the template's name-level
 * dependency list; `existing` are the rows that existed before this traversal
 * (only they get cleanup nodes).
 */
export function buildGraph(rows: Map<string, number>, dependsOn: Record<string, string[]>, existing: ExistingRow[]): TraversalGraph {
  const nodes = new Map<NodeId, GraphNode>()
  const edges: [NodeId, NodeId][] = []
  const names = new Map<number, string>()
  for (const r of existing) names.set(r.id, r.name)
  for (const [name, rid] of rows) names.set(rid, name)

  // Update part: one node per resource of the new template; same edge direction as the template.
  for (const [name, rid] of rows) {
    const from = nodeId({ rid, update: true })
    nodes.set(from, { id: from, rid, update: true, name })
  }
  for (const [name, rid] of rows) {
    const from = nodeId({ rid, update: true })
    for (const dep of dependsOn[name] ?? []) {
      const depRid = rows.get(dep)
      if (depRid === undefined) continue // a dependency on a resource whose condition is false
      edges.push([from, nodeId({ rid: depRid, update: true })])
    }
  }

  // Cleanup part: reversed order of what each row required when last created/updated,
  // so an old row is deleted only after everything that used it has moved on.
  const existingIds = new Set(existing.map((r) => r.id))
  for (const r of existing) {
    const self = nodeId({ rid: r.id, update: false })
    nodes.set(self, { id: self, rid: r.id, update: false, name: r.name })
  }
  for (const r of existing) {
    const self = nodeId({ rid: r.id, update: false })
    for (const q of r.requires) {
      if (existingIds.has(q)) edges.push([nodeId({ rid: q, update: false }), self])
    }
    // An older version is cleaned up after the newer one's cleanup node.
    if (r.replaces !== null && existingIds.has(r.replaces)) edges.push([nodeId({ rid: r.replaces, update: false }), self])
    // A row's cleanup always follows its own update.
    const upd = nodeId({ rid: r.id, update: true })
    if (nodes.has(upd)) edges.push([self, upd])
  }
  return { nodes: [...nodes.values()], edges: dedupeEdges(edges) }
}

/** A CHECK traversal: one update node per row at the stack's template, same edges, no cleanup. */
export function buildCheckGraph(rows: Map<string, number>, dependsOn: Record<string, string[]>): TraversalGraph {
  return buildGraph(rows, dependsOn, [])
}

function dedupeEdges(edges: [NodeId, NodeId][]): [NodeId, NodeId][] {
  const seen = new Set<string>()
  const out: [NodeId, NodeId][] = []
  for (const e of edges) {
    const k = `${e[0]}>${e[1]}`
    if (!seen.has(k)) {
      seen.add(k)
      out.push(e)
    }
  }
  return out
}

/** Cleanup nodes before update nodes, then by row id: the order messages are cast in. */
export function castOrder(a: NodeId, b: NodeId): number {
  const ka = parseNodeId(a)
  const kb = parseNodeId(b)
  if (ka.update !== kb.update) return ka.update ? 1 : -1
  return ka.rid - kb.rid
}

/** Step 4. */
export function indexGraph(graph: TraversalGraph): GraphIndex {
  const byId = new Map<NodeId, GraphNode>()
  const requires = new Map<NodeId, NodeId[]>()
  const requiredBy = new Map<NodeId, NodeId[]>()
  for (const n of graph.nodes) {
    byId.set(n.id, n)
    requires.set(n.id, [])
    requiredBy.set(n.id, [])
  }
  for (const [from, to] of graph.edges) {
    requires.get(from)?.push(to)
    requiredBy.get(to)?.push(from)
  }
  for (const list of requiredBy.values()) list.sort(castOrder)
  const leaves = graph.nodes.filter((n) => requires.get(n.id)!.length === 0).map((n) => n.id)
  leaves.sort(castOrder)
  const roots = new Set(graph.nodes.filter((n) => requiredBy.get(n.id)!.length === 0).map((n) => n.id))
  return { graph, byId, requires, requiredBy, leaves, roots }
}

/** Node ids on a cycle, if any (a traversal graph with a cycle could never finish). */
export function findCycle(index: GraphIndex): NodeId[] | null {
  const state = new Map<NodeId, 1 | 2>()
  const stack: NodeId[] = []
  // Iterative DFS: graphs have tens of thousands of nodes.
  for (const start of index.byId.keys()) {
    if (state.has(start)) continue
    const work: [NodeId, number][] = [[start, 0]]
    state.set(start, 1)
    stack.push(start)
    while (work.length) {
      const top = work[work.length - 1]!
      const next = index.requires.get(top[0])![top[1]]
      if (next === undefined) {
        state.set(top[0], 2)
        stack.pop()
        work.pop()
        continue
      }
      top[1]++
      const s = state.get(next)
      if (s === 1) return stack.slice(stack.indexOf(next))
      if (s === undefined) {
        state.set(next, 1)
        stack.push(next)
        work.push([next, 0])
      }
    }
  }
  return null
}

/**
 * The longest chain of nodes (by count), used for the "wall / critical path"
 * figure and the UI's critical path; `weight` gives a node's expected duration.
 */
export function criticalPath(index: GraphIndex, weight: (id: NodeId) => number = () => 1): { length: number; path: NodeId[] } {
  const memo = new Map<NodeId, { length: number; next: NodeId | null }>()
  const order = topoOrder(index)
  // Process in reverse dependency order: a node's best chain = its weight + best among what it waits for.
  for (const id of order) {
    let best: { length: number; next: NodeId | null } = { length: 0, next: null }
    for (const dep of index.requires.get(id) ?? []) {
      const d = memo.get(dep)!
      if (d.length > best.length) best = { length: d.length, next: dep }
    }
    memo.set(id, { length: best.length + weight(id), next: best.next })
  }
  let start: NodeId | null = null
  let length = 0
  for (const [id, v] of memo) {
    if (v.length > length) {
      length = v.length
      start = id
    }
  }
  const path: NodeId[] = []
  for (let cur = start; cur !== null; cur = memo.get(cur)!.next) path.push(cur)
  return { length, path: path.reverse() }
}

/** Nodes in an order where every node comes after what it waits for. */
export function topoOrder(index: GraphIndex): NodeId[] {
  const remaining = new Map<NodeId, number>()
  for (const [id, reqs] of index.requires) remaining.set(id, reqs.length)
  const queue = [...index.leaves]
  const out: NodeId[] = []
  for (let i = 0; i < queue.length; i++) {
    const id = queue[i]!
    out.push(id)
    for (const succ of index.requiredBy.get(id) ?? []) {
      const left = remaining.get(succ)! - 1
      remaining.set(succ, left)
      if (left === 0) queue.push(succ)
    }
  }
  return out
}
