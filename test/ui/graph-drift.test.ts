/**
 * Drift marks on the stack page, pure: a drift traversal's node events mark
 * their rows (and replay shows them as of a moment), the resource listing's
 * current findings mark the rows of whatever traversal is shown, the marks
 * are searched and filtered, and the traversal list says when the latest
 * check can no longer be current.
 */
import { describe, expect, test } from 'vitest'
import { describeEvent } from '../../lib/ui/event-text'
import { applyMarks, driftCounts, driftMayBeCurrent, driftOfEvent, endsMarks, marksOfListing } from '../../lib/ui/drift'
import { applyEvents, initialModel, type EventRow, type GraphElements } from '../../lib/ui/graph-model'
import { Replay } from '../../lib/ui/replay'
import { selectNodes } from '../../lib/ui/search'
import { driftLine, nodeLabel } from '../../components/graph-style'

const T = 'dddddddd-0000-0000-0000-000000000001'
const graph: GraphElements = {
  nodes: [
    { data: { id: '1:u', rid: 1, kind: 'update', name: 'conf' } },
    { data: { id: '2:u', rid: 2, kind: 'update', name: 'db' } },
    { data: { id: '3:u', rid: 3, kind: 'update', name: 'other' } },
  ],
  edges: [],
}

let seq = 0
const at = (secs: number) => new Date(1_000_000 + secs * 1000).toISOString()
/** A drift node's end event, as the engine writes it (finish_node with the finding as event data). */
const checked = (rid: number, drift: string, changed: string[] = [], secs = seq): EventRow => ({
  seq: ++seq, traversalId: T, kind: 'node', resourceId: rid, resourceName: null, action: null, status: null, reason: 'checked', at: at(secs),
  data: { rid, update: true, state: 'DONE', lock: 'released', drift, changed, problems: [] },
})

describe('drift marks', () => {
  test('a drift check\'s node events mark their rows live: modified (with the properties), gone, in sync', () => {
    seq = 0
    const m = initialModel(T, graph)
    const changed = applyEvents(m, [checked(1, 'MODIFIED', ['content'], 1), checked(2, 'DELETED', [], 2), checked(3, 'IN_SYNC', [], 3)])
    expect(changed).toEqual(new Set(['r1', 'r2', 'r3']))
    expect([...m.nodes.values()].map((n) => [n.name, n.state, n.drift?.state, n.drift?.changed])).toEqual([
      ['conf', 'complete', 'MODIFIED', ['content']],
      ['db', 'complete', 'DELETED', []],
      ['other', 'complete', 'IN_SYNC', []],
    ])
    expect(driftCounts(m)).toEqual({ modified: 1, deleted: 1 })
    // a text cue beside the shape: the graph's label says it in words, with its own icon
    expect(nodeLabel(m.nodes.get('r1')!)).toBe('✓ conf\ncomplete\n≠ drifted: content')
    expect(driftLine(m.nodes.get('r2')!)).toBe('⊘ gone outside Kiln')
    expect(driftLine(m.nodes.get('r3')!)).toBe('')
    // search and the filter
    expect(selectNodes(m, '', new Set(['drifted']))).toEqual(new Set(['r1', 'r2']))
    expect(selectNodes(m, 'drift:modified', new Set())).toEqual(new Set(['r1']))
    expect(selectNodes(m, 'drift:in-sync', new Set())).toEqual(new Set(['r3']))
  })

  test('replay shows the marks as of a moment', () => {
    seq = 0
    const events = [checked(1, 'MODIFIED', ['content'], 1), checked(2, 'IN_SYNC', [], 5)]
    const r = new Replay(T, graph, new Map(), events)
    r.seek(Date.parse(at(2)))
    expect([...r.model.nodes.values()].map((n) => n.drift?.state ?? null)).toEqual(['MODIFIED', null, null])
    r.seek(Date.parse(at(6)))
    expect([...r.model.nodes.values()].map((n) => n.drift?.state ?? null)).toEqual(['MODIFIED', 'IN_SYNC', null])
  })

  test('a drift node\'s event reads as what the check found', () => {
    seq = 0
    expect(describeEvent({ ...checked(1, 'MODIFIED', ['content']), reason: 'modified outside Kiln: content' })).toBe('drift check: modified outside Kiln: content')
    expect(describeEvent({ ...checked(3, 'IN_SYNC'), reason: 'in sync' })).toBe('drift check: in sync')
  })

  test('events without a finding, or with an unknown one, mark nothing', () => {
    seq = 0
    const e = checked(1, 'MODIFIED')
    expect(driftOfEvent({ ...e, data: { ...e.data, drift: 'SIDEWAYS' } })).toBeNull()
    expect(driftOfEvent({ ...e, data: { rid: 1, state: 'DONE' } })).toBeNull()
    expect(driftOfEvent(e)).toEqual({ state: 'MODIFIED', changed: [], problems: [], at: e.at, traversalId: T })
  })

  test('the listing\'s findings mark the rows of another traversal\'s model, with their values; only what changed is restyled', () => {
    const listing = [
      { id: 1, drift: { state: 'MODIFIED', changes: [{ property: 'content', stored: 'v1', seen: 'by hand' }], problems: [], observedAt: at(1), traversalId: T } },
      { id: 2, drift: null },
      { id: 3, drift: { state: 'IN_SYNC', changes: [], problems: [], observedAt: at(1), traversalId: T } },
    ]
    const marks = marksOfListing(listing)
    expect([...marks.keys()]).toEqual([1, 3])
    const check = initialModel('cccccccc-0000-0000-0000-000000000002', graph)
    expect(applyMarks(check, marks)).toEqual(new Set(['r1', 'r3']))
    expect(check.nodes.get('r1')!.drift).toMatchObject({ state: 'MODIFIED', changed: ['content'], changes: [{ property: 'content', stored: 'v1', seen: 'by hand' }] })
    expect(check.nodes.get('r2')!.drift).toBeNull()
    // the same marks again change nothing
    expect(applyMarks(check, marks)).toEqual(new Set())
  })

  test('the latest check may be current only while no traversal that changes resources started after it', () => {
    expect(driftMayBeCurrent([])).toBe(false)
    expect(driftMayBeCurrent([{ action: 'DRIFT' }, { action: 'CREATE' }])).toBe(true)
    expect(driftMayBeCurrent([{ action: 'CHECK' }, { action: 'DRIFT' }, { action: 'CREATE' }])).toBe(true)
    for (const action of ['UPDATE', 'ROLLBACK', 'CREATE', 'DELETE']) expect(driftMayBeCurrent([{ action }, { action: 'DRIFT' }])).toBe(false)
    expect(driftMayBeCurrent([{ action: 'CHECK' }, { action: 'CREATE' }])).toBe(false)
    // a new traversal ends the marks shown when it changes resources or is a new check; a stack check does not
    expect(['CREATE', 'UPDATE', 'ROLLBACK', 'DELETE', 'DRIFT'].filter(endsMarks)).toHaveLength(5)
    expect(endsMarks('CHECK')).toBe(false)
  })
})
