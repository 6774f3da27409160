/**
 * The stack page's pure parts: folding a traversal's events into display
 * nodes (blocked, retriggered, replaced, cleanup), the critical path with its
 * estimate, and the layered layout used for big graphs.
 */
import { describe, expect, test } from 'vitest'
import { applyEvents, criticalPath, initialModel, type EventRow, type GraphElements } from '../../lib/ui/graph-model'
import { layeredLayout } from '../../lib/ui/layout'

const T = 'aaaaaaaa-0000-0000-0000-000000000001'
// a -> b -> c (b needs a, c needs b); row 4 ('old') is only being deleted.
const graph: GraphElements = {
  nodes: [
    { data: { id: '1:u', rid: 1, kind: 'update', name: 'a' } },
    { data: { id: '2:u', rid: 2, kind: 'update', name: 'b' } },
    { data: { id: '3:u', rid: 3, kind: 'update', name: 'c' } },
    { data: { id: '1:c', rid: 1, kind: 'cleanup', name: 'a' } },
    { data: { id: '2:c', rid: 2, kind: 'cleanup', name: 'b' } },
    { data: { id: '4:c', rid: 4, kind: 'cleanup', name: 'old' } },
  ],
  edges: [
    { data: { id: '2:u->1:u', source: '2:u', target: '1:u' } },
    { data: { id: '3:u->2:u', source: '3:u', target: '2:u' } },
    { data: { id: '1:c->2:c', source: '1:c', target: '2:c' } },
  ],
}

let seq = 0
const ev = (o: Partial<EventRow> & { data: Record<string, unknown> }, secs = seq): EventRow => ({
  seq: ++seq, traversalId: T, kind: 'node', resourceId: null, resourceName: null, action: null, status: null, reason: '', at: new Date(1_000_000 + secs * 1000).toISOString(), ...o,
})

describe('graph model', () => {
  test('one display node per row; cleanup-only rows shown as cleanup; edges from dependency to dependent', () => {
    const m = initialModel(T, graph, [])
    expect([...m.nodes.values()].map((n) => [n.id, n.kind, n.state])).toEqual([
      ['r1', 'update', 'not-started'], ['r2', 'update', 'not-started'], ['r3', 'update', 'not-started'], ['r4', 'cleanup', 'not-started'],
    ])
    expect(m.edges.map((e) => e.id)).toEqual(['r1->r2', 'r2->r3'])
  })

  test('blocked, then retriggered, then running and complete; the marks stay', () => {
    seq = 0
    const m = initialModel(T, graph, [])
    applyEvents(m, [
      ev({ resourceId: 1, data: { rid: 1, update: true, state: 'BLOCKED', blocked_by: 'old-trav' } }),
      ev({ resourceId: 1, data: { rid: 1, update: true, state: 'READY', retriggered: true } }),
    ])
    expect(m.nodes.get('r1')!.state).toBe('retriggered')
    applyEvents(m, [
      ev({ resourceId: 1, kind: 'resource', data: { rid: 1, update: true, state: 'RUNNING', worker: 'w1' } }),
      ev({ resourceId: 2, data: { rid: 2, update: true, state: 'READY', satisfied: 1, required: 1 } }),
      ev({ resourceId: 1, kind: 'resource', data: { rid: 1, update: true, state: 'DONE', lock: 'released' } }),
    ])
    const a = m.nodes.get('r1')!
    expect([a.state, a.wasBlocked, a.retriggered, a.blockedBy, a.worker]).toEqual(['complete', true, true, 'old-trav', null])
    expect(m.nodes.get('r2')!.state).toBe('ready')
  })

  test('a replacement becomes its own node linked to the old row, which is later deleted by its cleanup node', () => {
    seq = 0
    const m = initialModel(T, graph, [])
    const changed = applyEvents(m, [
      ev({ resourceId: 2, data: { rid: 2, update: true, state: 'RUNNING' } }),
      ev({ resourceId: 2, data: { rid: 2, update: true, state: 'READY', replaced_by: 7 } }),
      ev({ resourceId: 7, kind: 'resource', data: { rid: 2, update: true, state: 'RUNNING' } }),
      ev({ resourceId: 7, kind: 'resource', data: { rid: 2, update: true, state: 'DONE' } }),
    ])
    expect(changed.has('r7')).toBe(true)
    expect(m.nodes.get('r2')!.state).toBe('replaced')
    expect(m.nodes.get('r7')!.state).toBe('complete')
    expect(m.nodes.get('r7')!.replaces).toBe(2)
    expect(m.edges.map((e) => e.id)).toEqual(expect.arrayContaining(['r1->r7', 'r7->r3', 'r2=>r7']))
    applyEvents(m, [
      ev({ resourceId: 2, data: { rid: 2, update: false, state: 'RUNNING' } }),
      ev({ resourceId: 2, data: { rid: 2, update: false, state: 'DONE' } }),
    ])
    expect(m.nodes.get('r2')!.state).toBe('deleted')
  })

  test("a kept row's no-op cleanup node does not repaint it; events of other traversals and old seqs are ignored", () => {
    seq = 0
    const m = initialModel(T, graph, [])
    applyEvents(m, [ev({ resourceId: 1, data: { rid: 1, update: true, state: 'DONE' } }), ev({ resourceId: 1, data: { rid: 1, update: false, state: 'RUNNING' } })])
    expect(m.nodes.get('r1')!.state).toBe('complete')
    applyEvents(m, [{ ...ev({ resourceId: 2, data: { rid: 2, update: true, state: 'FAILED' } }), traversalId: 'other' }])
    expect(m.nodes.get('r2')!.state).toBe('not-started')
    applyEvents(m, [{ ...ev({ resourceId: 2, data: { rid: 2, update: true, state: 'FAILED' } }), seq: 1 }])
    expect(m.nodes.get('r2')!.state).toBe('not-started')
  })

  test('critical path: the chain with the most work left, estimated from finished nodes', () => {
    seq = 0
    const m = initialModel(T, graph, [])
    applyEvents(m, [
      ev({ resourceId: 1, data: { rid: 1, update: true, state: 'RUNNING' } }, 0),
      ev({ resourceId: 1, data: { rid: 1, update: true, state: 'DONE' } }, 2),
    ])
    const est = criticalPath(m, 1_000_000 + 2000)
    expect(est.path).toEqual(['r2', 'r3'])
    expect(est.secondsLeft).toBe(4) // two nodes left on the chain, 2 s each
    expect([est.done, est.total]).toEqual([1, 4])
  })
})

describe('layered layout', () => {
  test('dependencies sit above dependents; long ranks wrap into rows', () => {
    const nodes = ['a', 'b', 'c', ...Array.from({ length: 90 }, (_, i) => `w${i}`)]
    const edges = [{ source: 'a', target: 'b' }, { source: 'b', target: 'c' }, { source: 'a', target: 'c' }]
    const at = layeredLayout(nodes, edges, { maxPerRow: 40 })
    expect(at.get('a')!.y).toBeLessThan(at.get('b')!.y)
    expect(at.get('b')!.y).toBeLessThan(at.get('c')!.y)
    // rank 0 holds a and the 90 independent nodes: 91 nodes -> 3 rows of at most 40
    const rows = new Set(['a', ...nodes.filter((n) => n.startsWith('w'))].map((n) => at.get(n)!.y))
    expect(rows.size).toBe(3)
    const xs = new Set(nodes.map((n) => `${at.get(n)!.x},${at.get(n)!.y}`))
    expect(xs.size).toBe(nodes.length) // no two nodes on the same spot
  })
})
