/**
 * The stack page's pure parts: folding a traversal's events into display
 * nodes (blocked, retriggered, replaced, cleanup, skipped at the traversal's
 * end), the critical path with its estimate, and replay by time.
 */
import { describe, expect, test } from 'vitest'
import { criticalPath } from '../../lib/ui/estimate'
import { applyEvents, hookOf, initialModel, nodeId, progressOf, stateCounts, type EventRow, type GraphElements } from '../../lib/ui/graph-model'
import { nodeLabel, stateText } from '../../components/graph-style'
import { Replay } from '../../lib/ui/replay'

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
const types = new Map([[1, 'OS::Heat::TestResource'], [2, 'OS::Heat::TestResource'], [3, 'OS::Heat::None'], [4, 'OS::Heat::None']])

let seq = 0
const ev = (o: Partial<EventRow> & { data: Record<string, unknown> | null }, secs = seq): EventRow => ({
  seq: ++seq, traversalId: T, kind: 'node', resourceId: null, resourceName: null, action: null, status: null, reason: '', at: new Date(1_000_000 + secs * 1000).toISOString(), ...o,
})
const stackEv = (status: string, data: Record<string, unknown> | null = null, secs = seq) => ev({ kind: 'stack', action: 'UPDATE', status, reason: `Stack UPDATE ${status}`, data }, secs)
const run = (rid: number, secs: number, update = true) => ev({ resourceId: rid, kind: 'resource', action: 'UPDATE', status: 'IN_PROGRESS', data: { rid, update, state: 'RUNNING', worker: 'w1', lock: 'acquired' } }, secs)
const done = (rid: number, secs: number, update = true) => ev({ resourceId: rid, kind: 'resource', action: 'UPDATE', status: 'COMPLETE', data: { rid, update, state: 'DONE', lock: 'released' } }, secs)

describe('graph model', () => {
  test('one display node per row, typed; cleanup-only rows shown as cleanup; edges from dependency to dependent', () => {
    const m = initialModel(T, graph, types)
    expect([...m.nodes.values()].map((n) => [n.id, n.kind, n.state, n.type])).toEqual([
      ['r1', 'update', 'not-started', 'OS::Heat::TestResource'], ['r2', 'update', 'not-started', 'OS::Heat::TestResource'],
      ['r3', 'update', 'not-started', 'OS::Heat::None'], ['r4', 'cleanup', 'not-started', 'OS::Heat::None'],
    ])
    expect(m.edges.map((e) => e.id)).toEqual(['r1->r2', 'r2->r3'])
  })

  test('blocked, then retriggered, then running and complete; the marks, the holder and the last worker stay', () => {
    seq = 0
    const m = initialModel(T, graph, types)
    applyEvents(m, [
      ev({ resourceId: 1, data: { rid: 1, update: true, state: 'BLOCKED', blocked_by: 'old-trav', holder: 'w0' } }),
      ev({ resourceId: 1, data: { rid: 1, update: true, state: 'READY', retriggered: true } }),
    ])
    expect(m.nodes.get('r1')!.state).toBe('retriggered')
    applyEvents(m, [run(1, 1), ev({ resourceId: 2, data: { rid: 2, update: true, state: 'READY', satisfied: 1, required: 1 } }), done(1, 2)])
    const a = m.nodes.get('r1')!
    expect([a.state, a.wasBlocked, a.retriggered, a.blockedBy, a.blockedHolder, a.worker, a.lastWorker, a.rowAction, a.rowStatus]).toEqual(['complete', true, true, 'old-trav', 'w0', null, 'w1', 'UPDATE', 'COMPLETE'])
    expect(a.history.map((h) => h.state)).toEqual(['blocked', 'retriggered', 'running', 'complete'])
    expect(m.nodes.get('r2')!.state).toBe('ready')
  })

  test('a replacement becomes its own node linked to the old row, which is later deleted by its cleanup node', () => {
    seq = 0
    const m = initialModel(T, graph, types)
    const changed = applyEvents(m, [
      ev({ resourceId: 2, data: { rid: 2, update: true, state: 'RUNNING' } }),
      ev({ resourceId: 2, data: { rid: 2, update: true, state: 'READY', replaced_by: 7 } }),
      ev({ resourceId: 7, kind: 'resource', data: { rid: 2, update: true, state: 'RUNNING' } }),
      ev({ resourceId: 7, kind: 'resource', data: { rid: 2, update: true, state: 'DONE' } }),
    ], types)
    expect(changed.has('r7')).toBe(true)
    expect(m.nodes.get('r2')!.state).toBe('replaced')
    expect(m.nodes.get('r7')!).toMatchObject({ state: 'complete', replaces: 2, type: 'OS::Heat::TestResource' })
    expect(m.edges.map((e) => e.id)).toEqual(expect.arrayContaining(['r1->r7', 'r7->r3', 'r2=>r7']))
    applyEvents(m, [
      ev({ resourceId: 2, data: { rid: 2, update: false, state: 'RUNNING' } }),
      ev({ resourceId: 2, data: { rid: 2, update: false, state: 'DONE' } }),
    ])
    expect(m.nodes.get('r2')!.state).toBe('deleted')
  })

  test("a kept row's no-op cleanup node does not repaint it; events of other traversals and old seqs are ignored", () => {
    seq = 0
    const m = initialModel(T, graph, types)
    applyEvents(m, [ev({ resourceId: 1, data: { rid: 1, update: true, state: 'DONE' } }), ev({ resourceId: 1, data: { rid: 1, update: false, state: 'RUNNING' } })])
    expect(m.nodes.get('r1')!.state).toBe('complete')
    applyEvents(m, [{ ...ev({ resourceId: 2, data: { rid: 2, update: true, state: 'FAILED' } }), traversalId: 'other' }])
    expect(m.nodes.get('r2')!.state).toBe('not-started')
    applyEvents(m, [{ ...ev({ resourceId: 2, data: { rid: 2, update: true, state: 'FAILED' } }), seq: 1 }])
    expect(m.nodes.get('r2')!.state).toBe('not-started')
  })

  test('a cancel without rollback: nodes that never started are skipped, the running one still finishes, and the end says cancelled', () => {
    seq = 0
    const m = initialModel(T, graph, types)
    applyEvents(m, [stackEv('IN_PROGRESS', { action: 'UPDATE' }, 0), run(1, 1), stackEv('FAILED', { cancelled: true }, 2)])
    expect(m.end).toMatchObject({ outcome: 'CANCELLED', reason: 'Stack UPDATE FAILED' })
    expect(stateCounts(m)).toEqual({ running: 1, skipped: 3 })
    // the row that was running finishes after the cancel, and a late input report does not revive a skipped node
    applyEvents(m, [done(1, 3), ev({ resourceId: 2, data: { rid: 2, update: true, state: 'READY', satisfied: 1, required: 1 } })])
    expect(m.nodes.get('r1')!.state).toBe('complete')
    expect(m.nodes.get('r2')!.state).toBe('skipped')
    expect(progressOf(m)).toEqual({ done: 4, total: 4 })
  })

  test('a failure skips what will never run; a supersede ends the traversal the same way; a completion skips nothing', () => {
    seq = 0
    const failed = initialModel(T, graph, types)
    applyEvents(failed, [run(1, 0), ev({ resourceId: 1, data: { rid: 1, update: true, state: 'FAILED' }, reason: 'boom' }), stackEv('FAILED', null, 1)])
    expect(failed.end?.outcome).toBe('FAILED')
    expect(stateCounts(failed)).toEqual({ failed: 1, skipped: 3 })
    const superseded = initialModel(T, graph, types)
    applyEvents(superseded, [ev({ kind: 'traversal', status: 'SUPERSEDED', reason: 'superseded by UPDATE x', data: { superseded_by: 'bbbb' } })])
    expect(superseded.end).toMatchObject({ outcome: 'SUPERSEDED', supersededBy: 'bbbb' })
    expect(stateCounts(superseded)).toEqual({ skipped: 4 })
    const complete = initialModel(T, graph, types)
    applyEvents(complete, [done(1, 0), stackEv('COMPLETE')])
    expect(complete.end?.outcome).toBe('COMPLETE')
    expect(stateCounts(complete)).toEqual({ complete: 1, 'not-started': 3 })
  })
})

describe('estimate', () => {
  test('the chain with the most work left, estimated from nodes that ran', () => {
    seq = 0
    const m = initialModel(T, graph, types)
    applyEvents(m, [run(1, 0), done(1, 2), run(4, 2, false), ev({ resourceId: 4, data: { rid: 4, update: false, state: 'DONE' } }, 4)])
    // a node that finished without running (already at its template) says nothing about durations
    applyEvents(m, [])
    const est = criticalPath(m, 1_000_000 + 4000)
    expect(est.path).toEqual(['r2', 'r3'])
    expect(est.secondsLeft).toBe(4) // two nodes left on the chain, 2 s each (the mean of the two that ran)
    expect([est.done, est.total, est.pending]).toEqual([2, 4, null])
  })

  test('no "0 s left" guesses: estimating until nodes ran, finishing once all are done, nothing once ended', () => {
    seq = 0
    const m = initialModel(T, graph, types)
    // two nodes finished at once without running: no sample yet
    applyEvents(m, [ev({ resourceId: 1, data: { rid: 1, update: true, state: 'DONE' }, reason: 'already at the traversal template' })])
    expect(criticalPath(m, 1_000_000)).toMatchObject({ secondsLeft: null, pending: 'estimating' })
    applyEvents(m, [done(2, 1), done(3, 1), ev({ resourceId: 4, data: { rid: 4, update: false, state: 'DONE' } })])
    expect(criticalPath(m, 1_000_000)).toMatchObject({ secondsLeft: null, pending: 'finishing', done: 4, total: 4 })
    applyEvents(m, [stackEv('COMPLETE')])
    expect(criticalPath(m, 1_000_000)).toMatchObject({ path: [], secondsLeft: null, pending: null })
  })
})

describe('replay by time', () => {
  test('moving forward folds only the new events; moving back rebuilds; the end matches the live fold', () => {
    seq = 0
    const events = [stackEv('IN_PROGRESS', null, 0), run(1, 1), done(1, 2), run(2, 3), done(2, 5), run(3, 6), done(3, 8), stackEv('COMPLETE', null, 9)]
    const r = new Replay(T, graph, types, events)
    expect(r.span).toEqual({ start: 1_000_000, end: 1_009_000 })
    expect(r.seek(1_000_000 + 2500)).toEqual(new Set(['r1']))
    expect(stateCounts(r.model)).toEqual({ complete: 1, 'not-started': 3 })
    const forward = r.seek(1_000_000 + 4000)
    expect(forward).toEqual(new Set(['r2']))
    expect(r.model.nodes.get('r2')!.state).toBe('running')
    expect(r.seek(1_000_000 + 500)).toBeNull()
    expect(stateCounts(r.model)).toEqual({ 'not-started': 4 })
    r.seek(1_000_000 + 9000)
    const live = initialModel(T, graph, types)
    applyEvents(live, events, types)
    expect([...r.model.nodes.values()].map((n) => n.state)).toEqual([...live.nodes.values()].map((n) => n.state))
    expect(r.position).toBe(events.length)
  })

  test('a parked node holds its row without a worker: its label says so, and names the hook it waits at', () => {
    const m = initialModel(T, graph, types)
    const parked = (rid: number, reason: string) => ev({ resourceId: rid, kind: 'node', reason: `parked: ${reason}`, data: { rid, update: true, state: 'RUNNING', lock: 'parked', parked: true, until: '2026-12-08T12:00:00.000Z' } })
    applyEvents(m, [run(1, 1), parked(1, 'CREATE paused until Hook pre-create is cleared'), run(2, 2), parked(2, 'waiting for 1 signal(s) on h')])
    const a = m.nodes.get(nodeId(1))!
    const b = m.nodes.get(nodeId(2))!
    expect([a.state, a.worker, hookOf(a), stateText(a)]).toEqual(['running', null, 'pre-create', 'paused at the pre-create hook'])
    expect(nodeLabel(a)).toBe('◷ a\npaused at the pre-create hook')
    expect([hookOf(b), stateText(b)]).toEqual([null, 'parked: waits, no worker'])
    // Woken: running again, with its worker.
    applyEvents(m, [run(1, 3)])
    expect([stateText(a), nodeLabel(a).startsWith('▶ a')]).toEqual(['running', true])
  })
})
