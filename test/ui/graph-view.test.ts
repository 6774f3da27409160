/**
 * What the graph panel draws, without a browser: the layered layout, positions
 * kept across traversals by name, replacements placed beside their rows,
 * grouping (prefix, type, layer) with counts, search and filters, and events
 * in plain words.
 */
import { describe, expect, test } from 'vitest'
import { describeEvent } from '../../lib/ui/event-text'
import { applyEvents, initialModel, type EventRow, type GraphElements } from '../../lib/ui/graph-model'
import { layeredLayout, layoutTraversal, placeBeside, type Point } from '../../lib/ui/layout'
import { selectNodes } from '../../lib/ui/search'
import { buildView, groupNodes, prefixOf, summarise } from '../../lib/ui/view-graph'

const T = 'aaaaaaaa-0000-0000-0000-000000000001'

/** layered: `layers` layers of `width` rows; each needs two of the layer before (the bench's shape). */
function layered(layers: number, width: number, names = (i: number) => `r${i}`): GraphElements {
  const nodes: GraphElements['nodes'] = []
  const edges: GraphElements['edges'] = []
  for (let i = 0; i < layers * width; i++) {
    nodes.push({ data: { id: `${i + 1}:u`, rid: i + 1, kind: 'update', name: names(i) } })
    const layer = Math.floor(i / width)
    if (layer === 0) continue
    const prev = (layer - 1) * width
    for (const j of new Set([prev + (i % width), prev + ((i + 1) % width)])) edges.push({ data: { id: `${i + 1}:u->${j + 1}:u`, source: `${i + 1}:u`, target: `${j + 1}:u` } })
  }
  return { nodes, edges }
}

const overlaps = (positions: Map<string, Point>) => {
  const pts = [...positions.values()]
  for (let i = 0; i < pts.length; i++) for (let j = i + 1; j < pts.length; j++) if (Math.abs(pts[i]!.x - pts[j]!.x) < 150 && Math.abs(pts[i]!.y - pts[j]!.y) < 44) return true
  return false
}

let seq = 0
const ev = (o: Partial<EventRow> & { data: Record<string, unknown> | null }): EventRow => ({
  seq: ++seq, traversalId: T, kind: 'node', resourceId: null, resourceName: null, action: null, status: null, reason: '', at: new Date(1_000_000 + seq * 1000).toISOString(), ...o,
})

describe('layout', () => {
  test('dependencies sit above dependents; long ranks wrap into rows; nothing overlaps', () => {
    const nodes = ['a', 'b', 'c', ...Array.from({ length: 90 }, (_, i) => `w${i}`)]
    const edges = [{ source: 'a', target: 'b' }, { source: 'b', target: 'c' }, { source: 'a', target: 'c' }]
    const at = layeredLayout(nodes, edges, { maxPerRow: 40 })
    expect(at.get('a')!.y).toBeLessThan(at.get('b')!.y)
    expect(at.get('b')!.y).toBeLessThan(at.get('c')!.y)
    // rank 0 holds a and the 90 independent nodes: 91 nodes -> 3 rows of at most 40
    const rows = new Set(['a', ...nodes.filter((n) => n.startsWith('w'))].map((n) => at.get(n)!.y))
    expect(rows.size).toBe(3)
    expect(overlaps(at)).toBe(false)
  })

  test('positions are kept by resource name for a graph of the same shape, and laid out again for another', () => {
    const first = initialModel(T, layered(3, 4), new Map())
    const lay1 = layoutTraversal([...first.nodes.values()].map((n) => ({ id: n.id, name: n.name, replaces: null })), first.edges, null)
    // the next traversal: same names and dependencies, new row ids (rows were replaced since)
    const renumbered = layered(3, 4)
    renumbered.nodes.forEach((n) => { n.data.rid += 100; n.data.id = `${n.data.rid}:u` })
    renumbered.edges.forEach((e) => { e.data.source = e.data.source.replace(/^(\d+)/, (d) => String(Number(d) + 100)); e.data.target = e.data.target.replace(/^(\d+)/, (d) => String(Number(d) + 100)) })
    const second = initialModel(T, renumbered, new Map())
    const lay2 = layoutTraversal([...second.nodes.values()].map((n) => ({ id: n.id, name: n.name, replaces: null })), second.edges, lay1.kept)
    expect(lay2.kept).toBe(lay1.kept)
    for (const n of second.nodes.values()) expect(lay2.positions.get(n.id)).toEqual(lay1.positions.get(`r${n.rowId - 100}`))
    const other = initialModel(T, layered(2, 4), new Map())
    const lay3 = layoutTraversal([...other.nodes.values()].map((n) => ({ id: n.id, name: n.name, replaces: null })), other.edges, lay1.kept)
    expect(lay3.kept).not.toBe(lay1.kept)
  })

  test('a replacement goes beside the row it replaces; the row moves aside so nothing overlaps', () => {
    const at = layeredLayout(['a', 'b', 'c', 'd'], [])
    const before = new Map(at)
    const p = placeBeside(at, 'b', 'b2')
    expect(p.y).toBe(before.get('b')!.y)
    expect(p.x).toBeGreaterThan(before.get('b')!.x)
    expect(at.get('a')).toEqual(before.get('a'))
    expect(at.get('c')!.x).toBeGreaterThan(before.get('c')!.x)
    expect(overlaps(at)).toBe(false)
  })
})

describe('grouping', () => {
  test('prefixes: a trailing index and what follows the first separator go', () => {
    expect(['web-server-3', 'web_db', 'r17', 'network', 'db.primary.2'].map(prefixOf)).toEqual(['web', 'web', 'r', 'network', 'db'])
  })

  test('by layer: 10,000 nodes become 10 groups with their counts; edges join the groups; one group opens into a box', () => {
    const m = initialModel(T, layered(10, 1000), new Map())
    const groups = groupNodes(m, 'layer')
    expect([...groups.values()].map((g) => [g.label, g.members.length])).toEqual(Array.from({ length: 10 }, (_, i) => [`layer ${i + 1}`, 1000]))
    const view = buildView(m, 'layer', new Set(), null)
    expect(view.units.length).toBe(10)
    expect(view.edges.length).toBe(9)
    expect(view.shownBy.size).toBe(10_000)
    seq = 0
    applyEvents(m, [ev({ resourceId: 1, data: { rid: 1, update: true, state: 'RUNNING' } }), ev({ resourceId: 2, data: { rid: 2, update: true, state: 'DONE' } })])
    expect(summarise(m, groups.get('g:layer:0')!.members)).toMatchObject({ counts: { running: 1, complete: 1, 'not-started': 998 }, done: 1, state: 'running' })
    const open = buildView(m, 'layer', new Set(['g:layer:0']), null)
    expect(open.units.filter((u) => u.kind === 'box').map((u) => u.id)).toEqual(['g:layer:0'])
    expect(open.units.filter((u) => u.parent === 'g:layer:0').length).toBe(1000)
    expect(open.units.filter((u) => u.kind === 'group').length).toBe(9)
    expect(overlaps(new Map([...open.positions].filter(([id]) => id.startsWith('r'))))).toBe(false)
  })

  test('by type and by prefix; a group of one is no group', () => {
    const names = ['web-1', 'web-2', 'web-3', 'db-1', 'db-2', 'lb']
    const g = layered(1, 6, (i) => names[i]!)
    const types = new Map([[1, 'A'], [2, 'A'], [3, 'B'], [4, 'B'], [5, 'B'], [6, 'C']])
    const m = initialModel(T, g, types)
    expect([...groupNodes(m, 'prefix').values()].map((x) => [x.label, x.members.length])).toEqual([['web', 3], ['db', 2]])
    expect([...groupNodes(m, 'type').values()].map((x) => [x.label, x.members.length])).toEqual([['A', 2], ['B', 3]])
    const view = buildView(m, 'prefix', new Set(), null)
    expect(view.units.map((u) => `${u.kind}:${u.id}`).sort()).toEqual(['group:g:prefix:db', 'group:g:prefix:web', 'node:r6'])
  })
})

describe('search and filters', () => {
  test('words must all match (name, type:, state:); filters narrow; nothing given selects nothing', () => {
    seq = 0
    const names = ['web-1', 'web-2', 'db-1']
    const m = initialModel(T, layered(1, 3, (i) => names[i]!), new Map([[1, 'OS::Nova::Server'], [2, 'OS::Nova::Server'], [3, 'OS::Trove::Instance']]))
    applyEvents(m, [ev({ resourceId: 1, data: { rid: 1, update: true, state: 'BLOCKED', blocked_by: 'x' } }), ev({ resourceId: 3, data: { rid: 3, update: true, state: 'FAILED' } })])
    expect(selectNodes(m, '', new Set())).toBeNull()
    expect(selectNodes(m, 'web', new Set())).toEqual(new Set(['r1', 'r2']))
    expect(selectNodes(m, 'type:nova state:blocked', new Set())).toEqual(new Set(['r1']))
    expect(selectNodes(m, 'state:not', new Set())).toEqual(new Set(['r2']))
    expect(selectNodes(m, '', new Set(['failed', 'blocked']))).toEqual(new Set(['r1', 'r3']))
    expect(selectNodes(m, 'web', new Set(['failed']))).toEqual(new Set())
  })
})

describe('events in plain words', () => {
  const workers = new Map([['w-1', 'vm:4121']])
  const e = (o: Partial<EventRow>): EventRow => ({ seq: 1, traversalId: T, kind: 'node', resourceId: 1, resourceName: 'a', action: null, status: null, reason: 'state changed', data: null, at: new Date(0).toISOString(), ...o })
  test.each([
    [{ kind: 'resource', action: 'UPDATE', status: 'COMPLETE', data: { state: 'DONE', update: true } }, 'updated in place'],
    [{ kind: 'resource', action: 'CREATE', status: 'IN_PROGRESS', data: { state: 'RUNNING', update: true, worker: 'w-1' } }, 'creating on vm:4121'],
    [{ reason: 'replaced: update_replace is true', data: { state: 'READY', replaced_by: 7 } }, 'replaced by #7: update_replace is true'],
    [{ data: { state: 'BLOCKED', blocked_by: '3f2a9c00-0000-0000-0000-000000000000', holder: 'w-1' } }, 'blocked: row locked by traversal 3f2a… on vm:4121'],
    [{ data: { state: 'BLOCKED', blocked_by: '3f2a9c00-0000-0000-0000-000000000000', holder: 'w-9999999' } }, 'blocked: row locked by traversal 3f2a… on worker w-99…'],
    [{ reason: 'already at the traversal template', data: { state: 'DONE', update: true } }, 'unchanged: already at this template'],
    [{ reason: 'already at the traversal template', data: { state: 'DONE', update: false } }, 'kept: nothing to clean up'],
    [{ data: { state: 'READY', retriggered: true } }, 'retriggered: the older traversal let go of the row'],
    [{ reason: 'input reported', data: { state: 'WAITING', satisfied: 1, required: 2 } }, 'waiting: 1 of 2 inputs reported'],
    [{ reason: 'resource failed', data: { state: 'FAILED' } }, 'failed: resource failed'],
  ] as [Partial<EventRow>, string][])('%j reads "%s"', (o, text) => {
    expect(describeEvent(e(o), workers)).toBe(text)
  })
})
