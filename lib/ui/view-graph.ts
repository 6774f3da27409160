/**
 * What the graph panel draws, derived from the model: every node on its own,
 * or nodes gathered into groups (by name prefix, resource type or layer).
 * A collapsed group is one node labelled with its members' state counts; an
 * expanded group is a box (a compound node) holding its members, laid out
 * among the other units as one block. Pure, so it is unit-tested.
 */
import { isDone, type DisplayNode, type GraphModel, type NodeState } from './graph-model'
import { layeredLayout, layoutTraversal, placeBeside, ranksOf, type KeptLayout, type LayoutOptions, type Point } from './layout'

export type GroupBy = 'none' | 'prefix' | 'type' | 'layer'

/** Above this many nodes the view starts grouped by layer (the drawing would be dots otherwise). */
export const GROUP_ABOVE = 2000

export const GROUP_SIZE = { w: 260, h: 72 }
const BOX_PAD = 24
const LAYOUT: Partial<LayoutOptions> = {}

/** "web-server-3" -> "web", "r17" -> "r", "network" -> "network". */
export function prefixOf(name: string): string {
  const stem = name.replace(/[-_.]?\d+$/, '')
  const cut = stem.search(/[-_.]/)
  return (cut > 0 ? stem.slice(0, cut) : stem) || name
}

export interface Group {
  id: string
  label: string
  members: string[]
}

/** Groups per model (they change only when nodes are added), so the page and the graph share one computation. */
const groupCache = new WeakMap<GraphModel, { by: GroupBy; size: number; groups: Map<string, Group> }>()

/** The nodes' groups (a group of one is no group); a replacement joins the group of the row it replaces. */
export function groupNodes(m: GraphModel, by: GroupBy): Map<string, Group> {
  const hit = groupCache.get(m)
  if (hit && hit.by === by && hit.size === m.nodes.size) return hit.groups
  const groups = computeGroups(m, by)
  groupCache.set(m, { by, size: m.nodes.size, groups })
  return groups
}

function computeGroups(m: GraphModel, by: GroupBy): Map<string, Group> {
  const out = new Map<string, Group>()
  if (by === 'none') return out
  const ranks = by === 'layer' ? layerRanks(m) : null
  const keyOf = (n: DisplayNode): string => {
    if (by === 'type') return n.type || 'unknown type'
    if (by === 'prefix') return prefixOf(n.name)
    return String(ranks!.get(n.id) ?? 0)
  }
  for (const n of m.nodes.values()) {
    const k = keyOf(n)
    const id = `g:${by}:${k}`
    let g = out.get(id)
    if (!g) out.set(id, (g = { id, label: by === 'layer' ? `layer ${Number(k) + 1}` : k, members: [] }))
    g.members.push(n.id)
  }
  for (const [id, g] of out) if (g.members.length < 2) out.delete(id)
  return out
}

/** Layer of each node: its rank among the rows the traversal planned; a replacement shares its old row's. */
function layerRanks(m: GraphModel): Map<string, number> {
  const primaries = [...m.nodes.values()].filter((n) => n.replaces === null || !m.nodes.has(`r${n.replaces}`))
  const ranks = ranksOf(primaries.map((n) => n.id), m.edges.filter((e) => e.kind === 'depends'))
  for (const n of m.nodes.values()) {
    if (ranks.has(n.id)) continue
    let cur: DisplayNode | undefined = n
    while (cur && cur.replaces !== null && !ranks.has(cur.id)) cur = m.nodes.get(`r${cur.replaces}`)
    ranks.set(n.id, (cur && ranks.get(cur.id)) ?? 0)
  }
  return ranks
}

export interface GroupSummary {
  counts: Partial<Record<NodeState, number>>
  done: number
  total: number
  /** the state the group is drawn in: its most urgent member's */
  state: NodeState
}

const URGENCY: NodeState[] = ['failed', 'blocked', 'running', 'deleting', 'retriggered', 'ready', 'waiting']

export function summarise(m: GraphModel, members: string[]): GroupSummary {
  const counts: Partial<Record<NodeState, number>> = {}
  let done = 0
  for (const id of members) {
    const n = m.nodes.get(id)
    if (!n) continue
    counts[n.state] = (counts[n.state] ?? 0) + 1
    if (isDone(n.state)) done++
  }
  const urgent = URGENCY.find((s) => counts[s])
  const state: NodeState = urgent ?? (done === members.length ? (counts.skipped === done ? 'skipped' : 'complete') : done > 0 ? 'waiting' : 'not-started')
  return { counts, done, total: members.length, state }
}

export interface ViewUnit {
  id: string
  /** node: one resource row; group: a collapsed group; box: an expanded group (compound parent) */
  kind: 'node' | 'group' | 'box'
  parent: string | null
}

export interface ViewEdge {
  id: string
  source: string
  target: string
  kind: 'depends' | 'replaces'
}

export interface ViewGraph {
  units: ViewUnit[]
  edges: ViewEdge[]
  positions: Map<string, Point>
  /** node id -> the unit that shows it (itself, or its collapsed group) */
  shownBy: Map<string, string>
  groups: Map<string, Group>
  /** the layout to keep for the next traversal (ungrouped views only) */
  kept: KeptLayout | null
}

function layoutNodes(m: GraphModel, ids: string[]) {
  const among = new Set(ids)
  return ids.map((id) => {
    const n = m.nodes.get(id)!
    return { id, name: n.name, replaces: n.replaces !== null && among.has(`r${n.replaces}`) ? `r${n.replaces}` : null }
  })
}

/** Units, edges between them, and positions, for a grouping and a set of expanded groups. */
export function buildView(m: GraphModel, by: GroupBy, expanded: ReadonlySet<string>, kept: KeptLayout | null): ViewGraph {
  const groups = groupNodes(m, by)
  const shownBy = new Map<string, string>()
  const units: ViewUnit[] = []
  if (groups.size === 0) {
    const ids = [...m.nodes.keys()]
    const lay = layoutTraversal(layoutNodes(m, ids), m.edges, kept, LAYOUT)
    for (const id of ids) {
      units.push({ id, kind: 'node', parent: null })
      shownBy.set(id, id)
    }
    return { units, edges: m.edges.map((e) => ({ id: e.id, source: e.source, target: e.target, kind: e.kind })), positions: lay.positions, shownBy, groups, kept: lay.kept }
  }

  const groupOf = new Map<string, string>()
  for (const g of groups.values()) for (const id of g.members) groupOf.set(id, g.id)
  // The top level: collapsed groups, expanded groups (as boxes), and nodes in no group.
  const topOf = (id: string) => groupOf.get(id) ?? id
  const inner = new Map<string, { positions: Map<string, Point>; w: number; h: number; cx: number; cy: number }>()
  for (const g of groups.values()) {
    if (!expanded.has(g.id)) {
      units.push({ id: g.id, kind: 'group', parent: null })
      for (const id of g.members) shownBy.set(id, g.id)
      continue
    }
    units.push({ id: g.id, kind: 'box', parent: null })
    const members = new Set(g.members)
    const lay = layoutTraversal(layoutNodes(m, g.members), m.edges.filter((e) => members.has(e.source) && members.has(e.target)), null, LAYOUT)
    let [x0, y0, x1, y1] = [Infinity, Infinity, -Infinity, -Infinity]
    for (const p of lay.positions.values()) [x0, y0, x1, y1] = [Math.min(x0, p.x), Math.min(y0, p.y), Math.max(x1, p.x), Math.max(y1, p.y)]
    const size = { w: x1 - x0 + 150 + 2 * BOX_PAD, h: y1 - y0 + 44 + 2 * BOX_PAD }
    inner.set(g.id, { positions: lay.positions, ...size, cx: (x0 + x1) / 2, cy: (y0 + y1) / 2 })
    for (const id of g.members) {
      units.push({ id, kind: 'node', parent: g.id })
      shownBy.set(id, id)
    }
  }
  const loose = [...m.nodes.values()].filter((n) => !groupOf.has(n.id))
  for (const n of loose) {
    units.push({ id: n.id, kind: 'node', parent: null })
    shownBy.set(n.id, n.id)
  }

  const topIds = [...groups.keys(), ...loose.filter((n) => n.replaces === null || !m.nodes.has(`r${n.replaces}`)).map((n) => n.id)]
  const topEdges = dedupe(m.edges.filter((e) => e.kind === 'depends').map((e) => ({ source: topOf(e.source), target: topOf(e.target) })))
  const size = (id: string) => (inner.has(id) ? { w: inner.get(id)!.w, h: inner.get(id)!.h } : groups.has(id) ? GROUP_SIZE : undefined)
  const positions = layeredLayout(topIds, topEdges, { ...LAYOUT, maxPerRow: 12 }, size)
  for (const n of loose) if (!positions.has(n.id)) placeBeside(positions, `r${n.replaces}`, n.id, LAYOUT)
  for (const [gid, box] of inner) {
    const c = positions.get(gid)!
    positions.delete(gid)
    for (const [id, p] of box.positions) positions.set(id, { x: c.x + p.x - box.cx, y: c.y + p.y - box.cy })
  }

  // Edges between what is drawn: a collapsed group stands for its members.
  const edges: ViewEdge[] = []
  const seen = new Set<string>()
  for (const e of m.edges) {
    const s = shownBy.get(e.source)
    const t = shownBy.get(e.target)
    if (!s || !t || s === t) continue
    const id = `${s}${e.kind === 'replaces' ? '=>' : '->'}${t}`
    if (seen.has(id)) continue
    seen.add(id)
    edges.push({ id, source: s, target: t, kind: e.kind })
  }
  return { units, edges, positions, shownBy, groups, kept: null }
}

function dedupe(edges: { source: string; target: string }[]) {
  const seen = new Set<string>()
  return edges.filter((e) => {
    const k = `${e.source}->${e.target}`
    if (e.source === e.target || seen.has(k)) return false
    seen.add(k)
    return true
  })
}
