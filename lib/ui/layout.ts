/**
 * The layered layout of traversal graphs, in linear-ish time: rank = longest
 * path from a root, order within a rank by a few barycenter sweeps, long
 * ranks wrapped into rows so a 1,000-wide stack is not a 150,000-pixel line.
 * dagre minimised crossings a little better but took 12.6 s for a 1,000-node,
 * 2,000-edge graph in headless Chromium; this takes milliseconds for 10,000.
 *
 * Positions are kept from one traversal to the next, keyed by resource name,
 * while the graph's shape (names and dependencies) stays the same; a
 * replacement that appears mid-traversal is placed beside the row it
 * replaces, its row's later nodes moving aside so that nothing overlaps.
 */

export interface LayoutOptions {
  nodeWidth: number
  nodeHeight: number
  gapX: number
  rankGap: number
  /** nodes per row before a rank wraps */
  maxPerRow: number
  sweeps: number
}

const DEFAULTS: LayoutOptions = { nodeWidth: 150, nodeHeight: 44, gapX: 20, rankGap: 50, maxPerRow: 40, sweeps: 4 }

/** Positions (node centres) for `nodes`; `edges` go from a dependency to its dependent. `size` gives a node's box when not the default. */
export function layeredLayout(nodes: string[], edges: { source: string; target: string }[], options: Partial<LayoutOptions> = {}, size?: (id: string) => { w: number; h: number } | undefined): Map<string, { x: number; y: number }> {
  const o = { ...DEFAULTS, ...options }
  const index = new Map(nodes.map((id, i) => [id, i]))
  const preds: number[][] = nodes.map(() => [])
  const succs: number[][] = nodes.map(() => [])
  for (const e of edges) {
    const s = index.get(e.source)
    const t = index.get(e.target)
    if (s === undefined || t === undefined || s === t) continue
    succs[s]!.push(t)
    preds[t]!.push(s)
  }
  const rank = longestPathRanks(nodes.length, preds, succs)

  const ranks: number[][] = []
  nodes.forEach((_, i) => (ranks[rank[i]!] ??= []).push(i))
  for (let r = 0; r < ranks.length; r++) ranks[r] ??= []
  const pos = new Array<number>(nodes.length).fill(0)
  const renumber = (layer: number[]) => layer.forEach((v, i) => (pos[v] = i))
  ranks.forEach(renumber)

  // Barycenter sweeps: down (by predecessors), then up (by successors).
  const bary = (v: number, nb: number[][]) => {
    const n = nb[v]!
    if (!n.length) return pos[v]!
    let s = 0
    for (const u of n) s += pos[u]!
    return s / n.length
  }
  for (let sweep = 0; sweep < o.sweeps; sweep++) {
    const down = sweep % 2 === 0
    const order = down ? ranks.keys() : [...ranks.keys()].reverse()
    for (const r of order) {
      const layer = ranks[r]!
      const key = new Map(layer.map((v) => [v, bary(v, down ? preds : succs)]))
      layer.sort((a, b) => key.get(a)! - key.get(b)! || a - b)
      renumber(layer)
    }
  }

  // Coordinates: each rank centred; a long rank wraps into rows; a row is as tall as its tallest box.
  const out = new Map<string, { x: number; y: number }>()
  const box = (v: number) => size?.(nodes[v]!) ?? { w: o.nodeWidth, h: o.nodeHeight }
  let top = 0
  for (const layer of ranks) {
    if (!layer.length) continue
    // A long rank wraps into rows of equal length (100 nodes: 34, 33, 33; not 40, 40, 20).
    const per = Math.ceil(layer.length / Math.ceil(layer.length / o.maxPerRow))
    for (let start = 0; start < layer.length; start += per) {
      const chunk = layer.slice(start, start + per)
      const boxes = chunk.map(box)
      const width = boxes.reduce((a, b) => a + b.w, 0) + o.gapX * (chunk.length - 1)
      const height = Math.max(...boxes.map((b) => b.h))
      let x = -width / 2
      chunk.forEach((v, i) => {
        out.set(nodes[v]!, { x: x + boxes[i]!.w / 2, y: top + height / 2 })
        x += boxes[i]!.w + o.gapX
      })
      top += height + o.rankGap
    }
  }
  return out
}

/** Longest-path ranks (Kahn's order). Anything left over (a cycle, which validation forbids) stays at rank 0. */
function longestPathRanks(n: number, preds: number[][], succs: number[][]): number[] {
  const rank = new Array<number>(n).fill(0)
  const indeg = preds.map((p) => p.length)
  const queue: number[] = []
  indeg.forEach((d, i) => d === 0 && queue.push(i))
  for (let q = 0; q < queue.length; q++) {
    const v = queue[q]!
    for (const w of succs[v]!) {
      rank[w] = Math.max(rank[w]!, rank[v]! + 1)
      if (--indeg[w]! === 0) queue.push(w)
    }
  }
  return rank
}

/** Each node's rank (longest path from a root), by id: the "layer" a node is grouped into. */
export function ranksOf(nodes: string[], edges: { source: string; target: string }[]): Map<string, number> {
  const index = new Map(nodes.map((id, i) => [id, i]))
  const preds: number[][] = nodes.map(() => [])
  const succs: number[][] = nodes.map(() => [])
  for (const e of edges) {
    const s = index.get(e.source)
    const t = index.get(e.target)
    if (s === undefined || t === undefined || s === t) continue
    succs[s]!.push(t)
    preds[t]!.push(s)
  }
  const rank = longestPathRanks(nodes.length, preds, succs)
  return new Map(nodes.map((id, i) => [id, rank[i]!]))
}

export type Point = { x: number; y: number }

export interface LayoutNode {
  id: string
  name: string
  /** the node (id) this one replaces, when it is a replacement row */
  replaces: string | null
}

/** Names and dependencies by name: equal keys mean the same drawing fits. */
export function shapeKey(nodes: LayoutNode[], edges: { source: string; target: string }[]): string {
  const name = new Map(nodes.map((n) => [n.id, n.name]))
  const primary = nodes.filter((n) => n.replaces === null).map((n) => n.name).sort()
  const deps = edges.flatMap((e) => (name.has(e.source) && name.has(e.target) ? [`${name.get(e.source)}>${name.get(e.target)}`] : [])).sort()
  return `${primary.join(',')}|${[...new Set(deps)].join(',')}`
}

/** A layout to reuse: node positions by resource name, for graphs of one shape. */
export interface KeptLayout {
  key: string
  byName: Map<string, Point>
}

/**
 * Positions for a traversal's nodes: the kept layout's when the shape is
 * the same, else a new layered layout (returned, to keep). Replacements are
 * placed beside the rows they replace.
 */
export function layoutTraversal(nodes: LayoutNode[], edges: { source: string; target: string; kind?: string }[], kept: KeptLayout | null, options: Partial<LayoutOptions> = {}): { positions: Map<string, Point>; kept: KeptLayout } {
  const deps = edges.filter((e) => e.kind === undefined || e.kind === 'depends')
  const key = shapeKey(nodes, deps)
  const primaries = nodes.filter((n) => n.replaces === null)
  let keep: KeptLayout
  if (kept && kept.key === key) keep = kept
  else {
    const at = layeredLayout(primaries.map((n) => n.id), deps, options)
    keep = { key, byName: new Map() }
    for (const n of primaries) if (!keep.byName.has(n.name)) keep.byName.set(n.name, at.get(n.id)!)
  }
  const byName = keep.byName
  const positions = new Map<string, Point>()
  // Two primaries of one name (a row being deleted beside its successor): the second goes beside the first.
  const seen = new Map<string, string>()
  for (const n of primaries) {
    const first = seen.get(n.name)
    if (first === undefined) {
      positions.set(n.id, { ...byName.get(n.name)! })
      seen.set(n.name, n.id)
    } else placeBeside(positions, first, n.id, options)
  }
  for (const n of nodes) if (n.replaces !== null) placeBeside(positions, n.replaces, n.id, options)
  return { positions, kept: keep }
}

/**
 * Puts `newId` just right of `oldId`: the nodes right of it on the same row
 * move one step right, so the new node covers none of them.
 */
export function placeBeside(positions: Map<string, Point>, oldId: string, newId: string, options: Partial<LayoutOptions> = {}): Point {
  const o = { ...DEFAULTS, ...options }
  const step = o.nodeWidth + o.gapX
  const old = positions.get(oldId)
  if (!old) {
    // the replaced node is not drawn: under everything else
    let maxY = 0
    for (const p of positions.values()) maxY = Math.max(maxY, p.y)
    const at = { x: 0, y: positions.size ? maxY + o.nodeHeight + o.rankGap : 0 }
    positions.set(newId, at)
    return at
  }
  for (const [id, p] of positions) if (id !== oldId && Math.abs(p.y - old.y) < o.nodeHeight && p.x > old.x) positions.set(id, { x: p.x + step, y: p.y })
  const at = { x: old.x + step, y: old.y }
  positions.set(newId, at)
  return at
}
