'use client'
/**
 * Everything the stack page shows, kept live.
 *
 * The database is the truth: on mount, on every (re)connect, on a gap in the
 * event sequence and when a new traversal starts, the page refetches over
 * REST (stack, resources, traversals, the current traversal's graph and all
 * its events) and folds the events into the graph model. Between refetches,
 * Socket.IO events are queued and applied once per animation frame, so a
 * 1,000-node traversal costs one render per frame, not one per event.
 */
import { useCallback, useEffect, useRef, useState } from 'react'
import { applyEvents, initialModel, type EventRow, type GraphElements, type GraphModel, type ResourceRow } from '../lib/ui/graph-model'
import { api, ApiError } from './api'
import { getSocket } from './socket'

export interface StackShow {
  id: string
  name: string
  action: string
  status: string
  statusReason: string
  currentTraversalId: string | null
  /** seq of the stack's latest event */
  lastSeq: number
  createdAt: string
  updatedAt: string | null
  disableRollback: boolean
  timeoutMins: number
  parameters: Record<string, unknown>
  outputs: Record<string, { value: unknown; description?: string; error?: string }>
  progress: { total: number; done: number; running: number; blocked: number; failed: number } | null
}

export interface TraversalRow {
  id: string
  action: string
  startedBy: string
  startedAt: string
  endedAt: string | null
  outcome: string | null
  outcomeReason: string
  supersededBy: string | null
  failureReason: string | null
  nodeCount: number
  current: boolean
}

export interface StackLive {
  loading: boolean
  notFound: boolean
  error: string | null
  stack: StackShow | null
  resources: ResourceRow[]
  traversals: TraversalRow[]
  model: GraphModel | null
  /** the current traversal's graph and events, for replay */
  graph: GraphElements | null
  traversalEvents: EventRow[]
  /** the most recent events of the stack (newest last), for the timeline */
  recent: EventRow[]
  /** bumps whenever the model changed */
  version: number
  /** true when the model was rebuilt (new traversal): the graph lays out again */
  rebuiltAt: number
  refresh: () => void
}

const RECENT = 300

/** The stack, all its resource rows and its traversals: what the page shows beside the events. */
async function fetchStack(stackId: string): Promise<{ stack: StackShow; resources: ResourceRow[]; traversals: TraversalRow[] }> {
  const [s, r, t] = await Promise.all([
    api<{ stack: StackShow }>('GET', `/api/stacks/${stackId}`),
    api<{ resources: ResourceRow[] }>('GET', `/api/stacks/${stackId}/resources?all=1`),
    api<{ traversals: TraversalRow[] }>('GET', `/api/stacks/${stackId}/traversals`),
  ])
  return { stack: s.stack, resources: r.resources, traversals: t.traversals }
}

async function allEvents(stackId: string, traversalId: string): Promise<{ events: EventRow[]; lastSeq: number }> {
  const out: EventRow[] = []
  let after = 0
  let lastSeq = 0
  for (;;) {
    const r = await api<{ events: EventRow[]; lastSeq: number }>('GET', `/api/stacks/${stackId}/events?traversal=${traversalId}&after=${after}&limit=1000`)
    out.push(...r.events)
    lastSeq = r.lastSeq
    if (r.events.length < 1000) break
    after = r.events.at(-1)!.seq
  }
  return { events: out, lastSeq }
}

export function useStackLive(stackId: string): StackLive {
  const [s, setS] = useState<StackLive>({
    loading: true, notFound: false, error: null, stack: null, resources: [], traversals: [], model: null, graph: null,
    traversalEvents: [], recent: [], version: 0, rebuiltAt: 0, refresh: () => {},
  })
  const live = useRef({ model: null as GraphModel | null, lastSeq: 0, traversalId: null as string | null, queue: [] as EventRow[], frame: 0, loading: false, again: false })

  const flushRef = useRef<() => void>(() => {})
  const sideRef = useRef<() => void>(() => {})
  const refetch = useCallback(async () => {
    const l = live.current
    if (l.loading) {
      l.again = true
      return
    }
    l.loading = true
    try {
      const { stack, resources, traversals } = await fetchStack(stackId)
      // The timeline first, then the traversal's events: every event up to the last seq seen is in the model.
      const recent = await api<{ events: EventRow[]; lastSeq: number }>('GET', `/api/stacks/${stackId}/events?after=${Math.max(0, stack.lastSeq - RECENT)}&limit=${RECENT}`)
      let lastSeq = Math.max(recent.lastSeq, recent.events.at(-1)?.seq ?? 0)
      let model: GraphModel | null = null
      let graph: GraphElements | null = null
      let traversalEvents: EventRow[] = []
      if (stack.currentTraversalId) {
        const g = await api<{ elements: GraphElements }>('GET', `/api/stacks/${stackId}/traversals/${stack.currentTraversalId}/graph`)
        graph = g.elements
        const ev = await allEvents(stackId, stack.currentTraversalId)
        traversalEvents = ev.events
        lastSeq = Math.max(lastSeq, ev.lastSeq, ev.events.at(-1)?.seq ?? 0)
        const rows = new Map(resources.map((r) => [r.id, r]))
        model = initialModel(stack.currentTraversalId, graph, resources)
        applyEvents(model, traversalEvents, rows)
        model.lastSeq = Math.max(model.lastSeq, lastSeq)
      }
      // Events newer than the stack snapshot were folded in: the stack's status and locks may be newer too.
      if (lastSeq > stack.lastSeq) sideRef.current()
      const rebuilt = l.traversalId !== stack.currentTraversalId || !l.model
      l.model = model
      l.lastSeq = lastSeq
      l.traversalId = stack.currentTraversalId
      l.queue = l.queue.filter((e) => e.seq > lastSeq)
      setS((p) => ({
        ...p, loading: false, notFound: false, error: null, stack, resources, traversals,
        model, graph, traversalEvents, recent: recent.events, version: p.version + 1,
        rebuiltAt: rebuilt ? Date.now() : p.rebuiltAt,
      }))
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) setS((p) => ({ ...p, loading: false, notFound: true }))
      else setS((p) => ({ ...p, loading: false, error: (err as Error).message }))
    } finally {
      l.loading = false
      if (l.again) {
        l.again = false
        void refetch()
      } else if (l.queue.length && !l.frame) l.frame = requestAnimationFrame(() => flushRef.current())
    }
  }, [stackId])

  // Side data that events do not carry fully (stack status/outputs, lock holders): refreshed at most every 700 ms.
  const sideTimer = useRef<ReturnType<typeof setTimeout> | null>(null)
  const refreshSide = useCallback(() => {
    sideTimer.current ??= setTimeout(async () => {
      sideTimer.current = null
      try {
        const side = await fetchStack(stackId)
        if (side.stack.currentTraversalId !== live.current.traversalId) return void refetch()
        setS((p) => ({ ...p, ...side }))
      } catch {
        /* the next event or reconnect refetches */
      }
    }, 700)
  }, [stackId, refetch])
  sideRef.current = refreshSide

  const flush = useCallback(() => {
    const l = live.current
    l.frame = 0
    // While a refetch runs, events wait in the queue (those it already covers are dropped after).
    if (l.loading) return
    const batch = l.queue.splice(0).filter((e) => e.seq > l.lastSeq).sort((a, b) => a.seq - b.seq)
    if (!batch.length) return
    // A gap, or a new traversal: the database is the truth.
    if (batch[0]!.seq !== l.lastSeq + 1 || batch.some((e) => e.traversalId && e.traversalId !== l.traversalId && (e.kind === 'stack' || e.kind === 'traversal'))) {
      void refetch()
      return
    }
    for (let i = 1; i < batch.length; i++) if (batch[i]!.seq !== batch[i - 1]!.seq + 1) return void refetch()
    if (l.model) applyEvents(l.model, batch)
    l.lastSeq = batch.at(-1)!.seq
    const forTraversal = batch.filter((e) => e.traversalId === l.traversalId)
    setS((p) => ({
      ...p,
      traversalEvents: forTraversal.length ? [...p.traversalEvents, ...forTraversal] : p.traversalEvents,
      recent: [...p.recent, ...batch].slice(-RECENT),
      version: p.version + 1,
    }))
    if (batch.some((e) => e.kind === 'stack' || e.kind === 'traversal' || e.kind === 'lock' || e.kind === 'resource')) refreshSide()
  }, [refetch, refreshSide])
  flushRef.current = flush

  useEffect(() => {
    const socket = getSocket()
    const l = live.current
    const subscribe = () =>
      socket.emit('stack:subscribe', stackId, (res) => {
        if (!res.ok) setS((p) => ({ ...p, notFound: res.error === 'not found' ? true : p.notFound }))
        void refetch()
      })
    const onEvents = (msg: { stackId: string; events: EventRow[] }) => {
      if (msg.stackId !== stackId) return
      l.queue.push(...msg.events)
      if (!l.frame) l.frame = requestAnimationFrame(flush)
    }
    // Steps lost in a database crash: the numbers after `lastSeq` will be used again.
    const onResync = (msg: { stackId: string }) => {
      if (msg.stackId === stackId) void refetch()
    }
    socket.on('stack:events', onEvents as never)
    socket.on('stack:resync', onResync)
    socket.on('connect', subscribe)
    if (socket.connected) subscribe()
    else void refetch()
    return () => {
      socket.off('stack:events', onEvents as never)
      socket.off('stack:resync', onResync)
      socket.off('connect', subscribe)
      socket.emit('stack:unsubscribe', stackId)
      if (l.frame) cancelAnimationFrame(l.frame)
      if (sideTimer.current) clearTimeout(sideTimer.current)
    }
  }, [stackId, refetch, flush])

  return { ...s, refresh: () => void refetch() }
}
