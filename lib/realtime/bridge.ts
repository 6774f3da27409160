/**
 * From PostgreSQL to browsers. Workers never call the web server: every event
 * row is written with `NOTIFY kiln_events '<stack id>'` in the same
 * transaction. Each web server LISTENs, reads the new rows of the stacks its
 * clients watch (seq > last sent), and emits them, in order, to the stack's
 * room. Several web servers each do this for their own clients.
 *
 * A step notifies only for a stack somebody watches (event_watch): the bridge
 * watches each stack it serves (kiln_watch_events), renews the watches on a
 * timer, and re-reads its stacks then, so a watch that lapsed (the database
 * unreachable for longer than its life) delays events, never loses them.
 *
 * The LISTEN connection comes back after an outage of any length (PgListener).
 * While it is down nothing is pushed; when it is back the bridge first checks
 * what a database crash may have taken back (rewind), then watches and re-reads
 * every stack it serves, so events written meanwhile reach their rooms, once
 * each and in order.
 */
import crypto from 'node:crypto'
import type { Db } from '../db/client'
import { PgListener } from '../db/listener'
import { delayFor } from '../db/retry'
import { eventsAfter, eventsStillHeld, serverStartTime, stackProjectAndServerStart, watchStackEvents } from '../db/queries/watch'
import type { Logger } from '../logger'
import { processMetrics } from '../metrics/registry'
import type { StackEventMessage } from './contracts'

export interface RoomEmitter {
  /** Is anybody in this room? */
  watched(room: string): boolean
  emit(room: string, event: string, payload: unknown): void
}

export interface Bridge {
  /** The seq a new subscriber's room starts after (events after it will be pushed). */
  track(stackId: string): Promise<number>
  /** The seq a stack's room has been sent up to, while the bridge serves it (no database work). */
  position(stackId: string): number | undefined
  close(): Promise<void>
  /** Delivered event count (for tests and the load suite). */
  readonly delivered: number
}

export function rowToMessage(r: Record<string, unknown>): StackEventMessage {
  return {
    version: 1,
    stackId: String(r.stack_id),
    seq: Number(r.seq),
    traversalId: (r.traversal_id as string | null) ?? null,
    kind: r.kind as StackEventMessage['kind'],
    resourceId: r.resource_id === null ? null : Number(r.resource_id),
    resourceName: (r.resource_name as string | null) ?? null,
    physicalId: (r.physical_id as string | null) ?? null,
    action: (r.action as string | null) ?? null,
    status: (r.status as string | null) ?? null,
    reason: String(r.reason ?? ''),
    data: (r.data as Record<string, unknown> | null) ?? null,
    at: new Date(r.created_at as string).toISOString(),
  }
}

/** How long a watch lives without renewal, and how often the bridge renews. */
const WATCH_TTL_MS = 60_000
const WATCH_RENEW_MS = 20_000
/** How long the LISTEN connection may take to answer the ping sent with each renewal. */
const PING_TIMEOUT_MS = 10_000

export function startBridge(opts: { url: string; pool: Db['pool']; rooms: RoomEmitter; log: Logger }): Bridge {
  const lastSeq = new Map<string, number>()
  const projectOf = new Map<string, string>()
  const dirty = new Set<string>()
  const lag = processMetrics('web').eventDeliveryLag
  let flushing = false
  let flushFailures = 0
  let flushRetry: NodeJS.Timeout | null = null
  let closed = false
  let delivered = 0
  /**
   * The LISTEN connection was lost and the rewind after its return has not run
   * yet: push nothing, since numbers already sent may have been handed out again.
   */
  let unsure = false
  let catchUpFailures = 0
  /** When the server last (re)started, as this bridge last saw it (pg_postmaster_start_time). */
  let serverStart: Date | null = null
  const watcher = crypto.randomUUID()

  /** Renew the watches of every served stack and re-read them (anything a lapsed watch did not announce). */
  async function renew() {
    if (!lastSeq.size || closed) return
    await watchStackEvents(opts.pool, watcher, [...lastSeq.keys()], WATCH_TTL_MS)
    for (const id of lastSeq.keys()) dirty.add(id)
    void flush()
  }
  // Timer reason: a watch expires unless renewed (so a web server that went away stops costing NOTIFYs).
  // The LISTEN connection is asked for an answer at the same time: a half-open one reports nothing by itself.
  const renewTimer = setInterval(() => {
    if (lastSeq.size) void listener.check(PING_TIMEOUT_MS)
    void renew().catch((err) => opts.log.warn(`event bridge: renewing watches: ${(err as Error).message}`))
  }, WATCH_RENEW_MS)
  renewTimer.unref()

  async function flush() {
    if (flushing || unsure) return
    flushing = true
    let stackId: string | undefined
    try {
      while (dirty.size && !closed && !unsure) {
        stackId = dirty.values().next().value as string
        dirty.delete(stackId)
        const room = `stack:${stackId}`
        const project = projectOf.get(stackId)
        const watched = opts.rooms.watched(room) || (project !== undefined && opts.rooms.watched(`project:${project}`))
        if (!lastSeq.has(stackId)) continue
        if (!watched) {
          // Nobody listens: stop tracking, so the next subscriber starts from the stack's current seq.
          lastSeq.delete(stackId)
          continue
        }
        for (;;) {
          const rows = await eventsAfter(opts.pool, stackId, lastSeq.get(stackId)!, 500)
          if (!rows.length || unsure) break
          const events = rows.map(rowToMessage)
          lastSeq.set(stackId, events.at(-1)!.seq)
          opts.rooms.emit(room, 'stack:events', { stackId, events })
          const now = Date.now()
          for (const r of rows) lag.observe(Math.max(0, now - new Date(r.created_at as string).getTime()) / 1000)
          if (project) for (const e of events) if (e.kind === 'stack') opts.rooms.emit(`project:${project}`, 'project:stack', e)
          delivered += events.length
          if (rows.length < 500) break
        }
        stackId = undefined
      }
      flushFailures = 0
    } catch (err) {
      // The stack being read is read again (its events are still owed to its room).
      if (stackId !== undefined) dirty.add(stackId)
      opts.log.warn(`event bridge: ${(err as Error).message}`)
      flushFailures++
    } finally {
      flushing = false
      if (dirty.size && !closed && !unsure && !flushRetry) {
        // Timer reason: a read failed (the database restarting?); retried with back-off, not at once.
        flushRetry = setTimeout(() => {
          flushRetry = null
          void flush()
        }, flushFailures ? delayFor(flushFailures, 200, 5000) : 0)
        flushRetry.unref()
      }
    }
  }

  /**
   * After the LISTEN connection was lost: steps lost in a database crash (lazy
   * commits) give their event numbers out again when they re-run, possibly
   * before this bridge is back. For each served stack find the last number
   * sent that still holds the event it held then: the last one at or below
   * it written before the server (re)started (events written since carry no
   * number this bridge sent before the restart). A stack where that is not
   * the last number sent is served on from there, and its room told to
   * refetch.
   */
  async function rewind() {
    const started = await serverStartTime(opts.pool)
    const restarted = serverStart !== null && started.getTime() !== serverStart.getTime()
    serverStart = started
    if (!lastSeq.size) return
    const rows = await eventsStillHeld(opts.pool, new Map(lastSeq), restarted ? started : null)
    for (const { stackId, sent, kept } of rows) {
      // A stack whose position moved meanwhile (a new subscriber's track) is left alone.
      if (kept >= sent || lastSeq.get(stackId) !== sent) continue
      opts.log.warn(`event bridge: stack ${stackId} holds the events it held up to ${kept}, after ${sent} were sent (steps lost in a database crash); rooms refetch`)
      lastSeq.set(stackId, kept)
      opts.rooms.emit(`stack:${stackId}`, 'stack:resync', { stackId, lastSeq: kept })
    }
  }

  /** The LISTEN connection is back: rewind if it had been lost, then watch again and re-read every served stack (retried until done). */
  let catchUpTimer: NodeJS.Timeout | null = null
  async function catchUp() {
    if (catchUpTimer) clearTimeout(catchUpTimer)
    catchUpTimer = null
    if (closed) return
    try {
      if (unsure) {
        await rewind()
        unsure = false
      }
      await renew()
      catchUpFailures = 0
    } catch (err) {
      if (closed) return
      opts.log.warn(`event bridge: catching up after the LISTEN connection came back: ${(err as Error).message}`)
      // Timer reason: the database answered LISTEN but not (yet) this read; try again with back-off.
      catchUpTimer = setTimeout(() => void catchUp(), delayFor(catchUpFailures++, 200, 5000))
      catchUpTimer.unref()
    }
  }

  const listener = PgListener.openInBackground({
    url: opts.url,
    channels: ['kiln_events'],
    application: 'kiln-web-events',
    label: 'event bridge',
    log: opts.log,
    onNotification: (msg) => {
      if (msg.channel !== 'kiln_events' || !msg.payload) return
      dirty.add(msg.payload)
      void flush()
    },
    onLost: () => {
      unsure = true
    },
    onReconnect: () => void catchUp(),
  })

  return {
    get delivered() {
      return delivered
    },
    async track(stackId: string) {
      const { projectId, started } = await stackProjectAndServerStart(opts.pool, stackId)
      if (projectId) projectOf.set(stackId, projectId)
      serverStart ??= started
      // Watched first: every event after the number it returns is announced.
      const seq = (await watchStackEvents(opts.pool, watcher, [stackId], WATCH_TTL_MS)).get(stackId) ?? 0
      // A stack already served keeps its position: moving it back would send events the
      // room's other members already have (found by the load suite). The new member
      // fetches anything up to the returned seq over REST.
      if (!lastSeq.has(stackId)) lastSeq.set(stackId, seq)
      return lastSeq.get(stackId)!
    },
    position: (stackId: string) => lastSeq.get(stackId),
    async close() {
      closed = true
      clearInterval(renewTimer)
      if (flushRetry) clearTimeout(flushRetry)
      if (catchUpTimer) clearTimeout(catchUpTimer)
      await listener.close()
    },
  }
}
