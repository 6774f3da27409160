'use client'
/**
 * Everything the stack page shows, kept live.
 *
 * Loaded once: the stack, its traversals, the shown traversal's graph, row
 * types and events (folded into the graph model), the workers' names. Then the
 * Socket.IO stream carries every change: events are folded into the model
 * incrementally, at most once per animation frame (every 100 ms while
 * Cytoscape draws a big graph's states: the graph says); a step that took
 * long, or frames that come late, make the next step wait longer (up to
 * 400 ms), so a burst merges into fewer, larger steps
 * (intermediate states are never drawn) instead of queueing frames. The
 * status badge follows the same stream, so it never runs ahead of the graph.
 *
 * REST is asked again only for what events do not carry: a new traversal's
 * graph, the events of a gap in the sequence (after a reconnect), the
 * stack's summary when a traversal ends, a worker's name; after a
 * `stack:resync` (steps lost in a database crash) everything is loaded again.
 *
 * Drift marks (lib/ui/drift.ts): the latest drift check's findings, from
 * the resource listing (asked only when the traversal list says the check
 * may still be current) and from the drift traversal's node events; a new
 * traversal that changes resources, or a new drift check, clears them.
 *
 * `pinned` (the history view) shows that traversal and never moves on; its
 * marks are those of its own events.
 */
import { useCallback, useEffect, useRef, useState } from 'react'
import { flushSync } from 'react-dom'
import { applyMarks, driftMayBeCurrent, driftOfEvent, endsMarks, marksOfListing, type DriftMark, type ListedDrift } from '../lib/ui/drift'
import { applyEvents, initialModel, type EventRow, type GraphElements, type GraphModel } from '../lib/ui/graph-model'
import { api, ApiError, withEarlyReads } from './api'
import { probeMark, reportReceived } from './perf-probe'
import { getSocket } from './socket'
import { fetchCurrent, fetchEvents, fetchGraph, fetchStack, fetchTraversal, fetchTraversals, fetchWorkers, typesById, workerIds, type StackShow, type TraversalMeta, type TraversalRow } from './stack-api'

export type { StackShow, TraversalRow, TraversalMeta }

/** The stack's status as of the last event applied. */
export interface LiveStatus {
  action: string
  status: string
  reason: string
  /** FAILED because a user cancelled it */
  cancelled: boolean
  seq: number
}

export interface StackLive {
  phase: 'loading' | 'ready' | 'not-found' | 'error'
  error: string | null
  stack: StackShow | null
  status: LiveStatus | null
  traversals: TraversalRow[]
  traversal: TraversalMeta | null
  model: GraphModel | null
  graph: GraphElements | null
  types: ReadonlyMap<number, string>
  /** the shown traversal's events, in seq order (replay, timeline) */
  events: EventRow[]
  workers: ReadonlyMap<string, string>
  /** bumps whenever the model changed */
  version: number
  /** node ids changed since the graph last drew them (the graph empties it) */
  dirty: Set<string>
  /** how far behind the engine the page is (ms), 0 when keeping up */
  behindMs: number
  refresh: () => void
}

interface Live {
  /** stack seq up to which the stream has been processed; null before the first load */
  cursor: number | null
  queue: EventRow[]
  /** loading, switching traversal or filling a gap: the queue waits */
  held: boolean
  model: GraphModel | null
  graph: GraphElements | null
  traversal: TraversalMeta | null
  types: Map<number, string>
  events: EventRow[]
  status: LiveStatus | null
  stack: StackShow | null
  traversals: TraversalRow[]
  workers: Map<string, string>
  dirty: Set<string>
  behindMs: number
  frame: number
  timer: ReturnType<typeof setTimeout> | null
  lastWorkersFetch: number
  generation: number
  /** when the last flush started (performance.now) */
  lastFlush: number
  /** how late animation frames come, smoothed (ms) */
  frameLate: number
  /** the current drift check's findings by row id (live view) */
  drift: Map<number, DriftMark>
  /** bumps whenever the marks are cleared: a listing asked for before that is stale */
  marksEpoch: number
  /** the stack's last seq when the room was joined: the room sends only what comes after it */
  joinedAt: number
}

const BEHIND_AFTER_MS = 1500
const MAX_SPACING_MS = 400
const FRAME_MS = 17

const statusOf = (s: StackShow, cancelled: boolean): LiveStatus => ({ action: s.action, status: s.status, reason: s.statusReason, cancelled, seq: s.lastSeq })

/**
 * `stepSpacingMs`: how long the graph wants between live steps (components/LiveGraph: a step that makes
 * Cytoscape redraw a big graph costs a redraw of every node; painted by the page's own canvas it does not).
 */
export function useStackLive(stackId: string, pinned: string | null = null, stepSpacingMs: () => number = () => 0): StackLive {
  const L = useRef<Live>({
    cursor: null, queue: [], held: true, model: null, graph: null, traversal: null, types: new Map(), events: [], status: null, stack: null,
    traversals: [], workers: new Map(), dirty: new Set(), behindMs: 0, frame: 0, timer: null, lastWorkersFetch: 0, generation: 0, lastFlush: 0, frameLate: 0,
    drift: new Map(), marksEpoch: 0, joinedAt: 0,
  }).current
  const [version, setVersion] = useState(0)
  const [phase, setPhase] = useState<{ phase: StackLive['phase']; error: string | null }>({ phase: 'loading', error: null })
  const bump = useCallback((sync: boolean) => (sync ? flushSync(() => setVersion((v) => v + 1)) : setVersion((v) => v + 1)), [])

  /** Events wait (a gap being filled, a new traversal's graph loading): how long the oldest has waited. */
  const noteBehind = useCallback(() => {
    const oldest = L.queue[0]
    const behind = oldest ? Date.now() - Date.parse(oldest.at) : 0
    const shown = L.behindMs
    L.behindMs = behind > BEHIND_AFTER_MS ? behind : 0
    if (Math.round(shown / 1000) !== Math.round(L.behindMs / 1000)) bump(false)
  }, [L, bump])

  const fail = useCallback((err: unknown) => {
    if (err instanceof ApiError && err.status === 404) setPhase({ phase: 'not-found', error: null })
    else setPhase({ phase: 'error', error: (err as Error).message })
  }, [])

  /** The stack's summary and traversal list (when a traversal starts or ends). */
  const refreshMeta = useCallback(async () => {
    try {
      const [stack, traversals] = await Promise.all([fetchStack(stackId), fetchTraversals(stackId)])
      L.stack = stack
      L.traversals = traversals
      bump(false)
    } catch {
      /* the next event or reconnect tries again */
    }
  }, [stackId, L, bump])

  /** Names for workers the events name that the page does not know yet (at most one request per 5 s). */
  const noteWorkers = useCallback((events: EventRow[]) => {
    const unknown = workerIds(events).filter((id) => !L.workers.has(id))
    if (!unknown.length || Date.now() - L.lastWorkersFetch < 5000) return
    L.lastWorkersFetch = Date.now()
    fetchWorkers(stackId, unknown).then((w) => {
      if (!w.size) return
      L.workers = new Map([...L.workers, ...w])
      bump(false)
    }, () => {})
  }, [stackId, L, bump])

  // Declared below; referenced through refs so the callbacks stay stable.
  const flushRef = useRef<() => void>(() => {})
  const spacingRef = useRef(stepSpacingMs)
  spacingRef.current = stepSpacingMs
  const schedule = useCallback((delayMs = 0) => {
    if (L.frame || L.timer) return
    // Steps are spaced as the graph asks (a big graph that Cytoscape redraws: every 100 ms), and the
    // events of the interval are merged into one step (intermediate states are never drawn).
    // When frames come late (the main thread is busy), steps are spaced further, up to MAX_SPACING_MS.
    const spacing = Math.min(MAX_SPACING_MS, spacingRef.current() + 2 * L.frameLate)
    delayMs = Math.max(delayMs, spacing - (performance.now() - L.lastFlush))
    const go = () => {
      L.timer = null
      const asked = performance.now()
      L.frame = requestAnimationFrame(() => {
        L.frame = 0
        // How late this frame came, smoothed: what the page's drawing and everything else on the machine cost.
        const late = Math.max(0, performance.now() - asked - FRAME_MS)
        L.frameLate = L.frameLate * 0.7 + late * 0.3
        flushRef.current()
      })
    }
    if (delayMs > 0) L.timer = setTimeout(go, delayMs)
    else go()
  }, [L])

  /**
   * Show traversal `tid` (graph and types fetched), folding `events` (its events up to `lastSeq`) in.
   * `started`: it has just started (not loaded as it was): if it changes resources or is a new drift
   * check, the marks shown so far no longer hold.
   */
  const showTraversal = useCallback((tid: string, meta: TraversalMeta, graph: GraphElements, events: EventRow[], lastSeq: number, started = false) => {
    const types = typesById(meta)
    const model = initialModel(tid, graph, types)
    applyEvents(model, events, types)
    model.lastSeq = Math.max(model.lastSeq, lastSeq)
    if (!pinned) {
      if (started && endsMarks(meta.action)) {
        L.drift = new Map()
        L.marksEpoch++
      }
      noteMarks(L, events)
      applyMarks(model, L.drift)
    }
    Object.assign(L, { model, graph, traversal: meta, types, events: events.filter((e) => e.traversalId === tid) })
    L.dirty = new Set(model.nodes.keys())
  }, [L, pinned])

  /** The current drift check's findings with their stored and seen values, from the resource listing (once per load). */
  const loadMarks = useCallback(async (gen: number) => {
    const epoch = L.marksEpoch
    try {
      const { resources } = await api<{ resources: ListedDrift[] }>('GET', `/api/stacks/${stackId}/resources`)
      // Cleared meanwhile (an update or a new check started): these findings are stale.
      if (gen !== L.generation || epoch !== L.marksEpoch) return
      for (const [rid, mark] of marksOfListing(resources)) {
        const had = L.drift.get(rid)
        // A finding the live events already gave for a newer check stays.
        if (!had || had.traversalId === mark.traversalId) L.drift.set(rid, mark)
      }
      if (!L.model) return
      const changed = applyMarks(L.model, L.drift)
      if (!changed.size) return
      for (const id of changed) L.dirty.add(id)
      bump(false)
    } catch {
      /* the marks from the events still show; the next load asks again */
    }
  }, [stackId, L, bump])

  /** Events after the cursor that the stream did not deliver (a reconnect, a gap). */
  const fillGap = useCallback(async () => {
    const gen = L.generation
    L.held = true
    try {
      const ev = await fetchEvents(stackId, { after: L.cursor! })
      if (gen !== L.generation) return
      const have = new Set(L.queue.map((e) => e.seq))
      L.queue.push(...ev.events.filter((e) => !have.has(e.seq)))
    } catch {
      /* retried on the next event or reconnect */
    } finally {
      if (gen === L.generation) {
        L.held = false
        schedule()
      }
    }
  }, [stackId, L, schedule])

  /**
   * Everything, from the start. The stream is then processed from the stack
   * snapshot's seq: events up to the traversal's snapshot only move the badge
   * (or announce a newer traversal); anything the room did not deliver since
   * is a gap, fetched like any other.
   */
  const load = useCallback(async () => {
    const gen = ++L.generation
    L.held = true
    try {
      probeMark('load')
      // The current traversal is asked for beside the stack (one round trip, not two); if it is not
      // the one the stack names (a traversal started in between), the one named is asked for below.
      // The stack page's HTML started these reads (components/EarlyReads.tsx); a reload asks afresh.
      const [stack, traversals, current] = await withEarlyReads(() => Promise.all([
        fetchStack(stackId).finally(() => probeMark('stack')),
        fetchTraversals(stackId),
        pinned ? null : fetchCurrent(stackId, probeMark),
      ]))
      if (gen !== L.generation) return
      Object.assign(L, { stack, traversals, workers: new Map(), lastWorkersFetch: 0, drift: new Map() })
      L.marksEpoch++
      const tid = pinned ?? stack.currentTraversalId ?? traversals[0]?.id ?? null
      L.status = statusOf(stack, stack.status === 'FAILED' && traversals.find((t) => t.id === tid)?.outcome === 'CANCELLED')
      if (tid) {
        const [meta, graph, ev] = current?.meta.id === tid ? [current.meta, current.graph, current.ev] : await Promise.all([
          fetchTraversal(stackId, tid).finally(() => probeMark('traversal')),
          fetchGraph(stackId, tid).finally(() => probeMark('graph')),
          fetchEvents(stackId, { after: 0, traversal: tid }).finally(() => probeMark('events')),
        ])
        if (gen !== L.generation) return
        for (const e of ev.events) noteStatus(L, e)
        showTraversal(tid, meta, graph, ev.events, ev.lastSeq)
        probeMark('folded')
        noteWorkers(ev.events)
      } else Object.assign(L, { model: null, graph: null, traversal: null, events: [] })
      L.cursor = stack.lastSeq
      L.held = false
      setPhase({ phase: 'ready', error: null })
      bump(false)
      // Joined the room after these reads were answered (the page's HTML starts them early): what
      // happened in between the room will never send. Without a later event to reveal the gap, a
      // traversal that ended meanwhile would look as if it still ran.
      if (L.joinedAt > L.cursor) void fillGap()
      else schedule()
      if (!pinned && driftMayBeCurrent(traversals)) void loadMarks(gen)
    } catch (err) {
      if (gen === L.generation) fail(err)
    }
  }, [stackId, pinned, L, showTraversal, noteWorkers, bump, schedule, fail, loadMarks, fillGap])

  const switchTo = useCallback(async (tid: string) => {
    const gen = L.generation
    L.held = true
    try {
      const [meta, graph] = await Promise.all([fetchTraversal(stackId, tid), fetchGraph(stackId, tid)])
      if (gen !== L.generation) return
      showTraversal(tid, meta, graph, [], L.cursor!, true)
      void refreshMeta()
    } catch (err) {
      fail(err)
    } finally {
      if (gen === L.generation) {
        L.held = false
        // The next step draws the new traversal: a frame later, so that reading its graph and drawing it are two frames.
        schedule(FRAME_MS)
      }
    }
  }, [stackId, L, showTraversal, refreshMeta, schedule, fail])

  flushRef.current = () => {
    if (L.held || L.cursor === null) return
    const started = performance.now()
    L.lastFlush = started
    L.queue.sort((a, b) => a.seq - b.seq)
    const from = L.cursor
    const mine: EventRow[] = []
    let ended = false
    let i = 0
    for (; i < L.queue.length; i++) {
      const e = L.queue[i]!
      if (e.seq <= L.cursor) continue
      if (e.seq !== L.cursor + 1) {
        // A gap: the database is the truth.
        L.queue = L.queue.slice(i)
        fold(mine)
        noteBehind()
        void fillGap()
        return
      }
      if (!pinned && e.kind === 'stack' && e.status === 'IN_PROGRESS' && e.traversalId && e.traversalId !== L.model?.traversalId) {
        // A new traversal: its graph first; its events wait in the queue.
        L.queue = L.queue.slice(i)
        fold(mine)
        noteStatus(L, e)
        noteBehind()
        void switchTo(e.traversalId)
        return
      }
      L.cursor = e.seq
      noteStatus(L, e)
      if (e.traversalId && e.traversalId === L.model?.traversalId) {
        mine.push(e)
        if ((e.kind === 'stack' && e.status !== 'IN_PROGRESS') || (e.kind === 'traversal' && e.status === 'SUPERSEDED')) ended = true
      }
    }
    L.queue = []
    L.behindMs = 0
    fold(mine)
    if (mine.length === 0 && L.cursor !== from) bump(true)
    if (ended) void refreshMeta()
    const cost = performance.now() - started
    // A long step makes the next one wait as long: the page keeps half the main thread for drawing and input.
    if (L.queue.length) schedule(cost > 12 ? cost : 0)
  }

  /** Folds the stream's events of the shown traversal into the model and redraws. */
  function fold(all: EventRow[]) {
    const m = L.model
    // Events the load already folded in come through the stream again (they moved only the badge then).
    const events = m ? all.filter((e) => e.seq > m.lastSeq) : []
    if (!events.length || !m) return
    const changed = applyEvents(m, events, L.types)
    if (!pinned) noteMarks(L, events)
    for (const id of changed) L.dirty.add(id)
    L.events.push(...events)
    noteWorkers(events)
    bump(true)
  }

  useEffect(() => {
    const socket = getSocket()
    let retry: ReturnType<typeof setTimeout> | null = null
    // The room's ack says where it starts: anything between our position and that was not pushed.
    const subscribe = () =>
      socket.emit('stack:subscribe', stackId, (res) => {
        if (!res.ok) {
          if (res.error === 'not found') setPhase({ phase: 'not-found', error: null })
          // Timer reason: the connection sent too many messages; the server said when it takes more.
          else if (res.error === 'rate limited' && !retry) retry = setTimeout(() => ((retry = null), subscribe()), (res.retryAfter ?? 1) * 1000)
        } else {
          L.joinedAt = res.lastSeq
          if (L.cursor !== null && !L.held && res.lastSeq > L.cursor) void fillGap()
        }
      })
    const onEvents = (msg: { stackId: string; events: EventRow[] }) => {
      if (msg.stackId !== stackId) return
      if (msg.events.length) reportReceived(msg.events.at(-1)!.seq)
      L.queue.push(...msg.events)
      if (L.held) noteBehind()
      schedule()
    }
    const onResync = (msg: { stackId: string }) => {
      if (msg.stackId !== stackId) return
      L.queue = []
      void load()
    }
    socket.on('stack:events', onEvents as never)
    socket.on('stack:resync', onResync)
    socket.on('connect', subscribe)
    if (socket.connected) subscribe()
    void load()
    return () => {
      L.generation++
      socket.off('stack:events', onEvents as never)
      socket.off('stack:resync', onResync)
      socket.off('connect', subscribe)
      if (retry) clearTimeout(retry)
      socket.emit('stack:unsubscribe', stackId)
      if (L.frame) cancelAnimationFrame(L.frame)
      if (L.timer) clearTimeout(L.timer)
      L.frame = 0
      L.timer = null
    }
  }, [stackId, L, load, fillGap, schedule, noteBehind])

  return {
    ...phase,
    stack: L.stack,
    status: L.status,
    traversals: L.traversals,
    traversal: L.traversal,
    model: L.model,
    graph: L.graph,
    types: L.types,
    events: L.events,
    workers: L.workers,
    version,
    dirty: L.dirty,
    behindMs: L.behindMs,
    refresh: () => void load(),
  }
}

/** The drift findings the events name, kept by row id (for the next traversal shown, while they hold). */
function noteMarks(L: Live, events: EventRow[]) {
  for (const e of events) {
    const mark = e.resourceId !== null ? driftOfEvent(e) : null
    if (mark) L.drift.set(e.resourceId!, mark)
  }
}

/** A stack event moves the badge (only forward: a snapshot may be newer than an event still queued). */
function noteStatus(L: Live, e: EventRow) {
  if (e.kind !== 'stack' || !e.action || !e.status) return
  if (L.status && e.seq <= L.status.seq) return
  L.status = { action: e.action, status: e.status, reason: e.reason, cancelled: e.status === 'FAILED' && e.data?.cancelled === true, seq: e.seq }
}
