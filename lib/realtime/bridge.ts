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
 */
import crypto from 'node:crypto'
import pg from 'pg'
import { watchStackEvents } from '../db/queries/watch'
import type { Logger } from '../logger'
import type { StackEventMessage } from './contracts'

export interface RoomEmitter {
  /** Is anybody in this room? */
  watched(room: string): boolean
  emit(room: string, event: string, payload: unknown): void
}

export interface Bridge {
  /** The seq a new subscriber's room starts after (events after it will be pushed). */
  track(stackId: string): Promise<number>
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

export function startBridge(opts: { url: string; pool: pg.Pool; rooms: RoomEmitter; log: Logger }): Bridge {
  const lastSeq = new Map<string, number>()
  const projectOf = new Map<string, string>()
  const dirty = new Set<string>()
  let flushing = false
  let closed = false
  let client: pg.Client | null = null
  let backoff = 0
  let delivered = 0
  const watcher = crypto.randomUUID()

  /** Renew the watches of every served stack and re-read them (anything a lapsed watch did not announce). */
  async function renew() {
    if (!lastSeq.size || closed) return
    await watchStackEvents(opts.pool, watcher, [...lastSeq.keys()], WATCH_TTL_MS)
    for (const id of lastSeq.keys()) dirty.add(id)
    void flush()
  }
  // Timer reason: a watch expires unless renewed (so a web server that went away stops costing NOTIFYs).
  const renewTimer = setInterval(() => void renew().catch((err) => opts.log.warn(`event bridge: renewing watches: ${(err as Error).message}`)), WATCH_RENEW_MS)
  renewTimer.unref()

  async function flush() {
    if (flushing) return
    flushing = true
    try {
      while (dirty.size && !closed) {
        const stackId = dirty.values().next().value as string
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
          const { rows } = await opts.pool.query(`SELECT * FROM event WHERE stack_id = $1 AND seq > $2 ORDER BY seq LIMIT 500`, [stackId, lastSeq.get(stackId)])
          if (!rows.length) break
          const events = rows.map(rowToMessage)
          lastSeq.set(stackId, events.at(-1)!.seq)
          opts.rooms.emit(room, 'stack:events', { stackId, events })
          if (project) for (const e of events) if (e.kind === 'stack') opts.rooms.emit(`project:${project}`, 'project:stack', e)
          delivered += events.length
          if (rows.length < 500) break
        }
      }
    } catch (err) {
      opts.log.warn(`event bridge: ${(err as Error).message}`)
    } finally {
      flushing = false
      if (dirty.size && !closed) setTimeout(() => void flush(), 200).unref()
    }
  }

  /**
   * After the connection to PostgreSQL was lost: a stack whose last event is
   * older than the last one sent lost steps in a database crash (lazy commits;
   * their numbers will be used again). Serve it from what is there, and tell
   * its room to refetch.
   */
  async function rewind() {
    if (!lastSeq.size) return
    const { rows } = await opts.pool.query(`SELECT id, kiln_last_seq(id) AS seq FROM stack WHERE id = ANY($1::uuid[])`, [[...lastSeq.keys()]])
    for (const r of rows) {
      const stackId = String(r.id)
      const have = Number(r.seq)
      if (have >= (lastSeq.get(stackId) ?? 0)) continue
      opts.log.warn(`event bridge: stack ${stackId} has events up to ${have} after ${lastSeq.get(stackId)} were sent (lost in a database crash); rooms refetch`)
      lastSeq.set(stackId, have)
      opts.rooms.emit(`stack:${stackId}`, 'stack:resync', { stackId, lastSeq: have })
    }
  }

  async function connect() {
    const c = new pg.Client({ connectionString: opts.url, application_name: 'kiln-web-events' })
    c.on('notification', (msg) => {
      if (msg.channel !== 'kiln_events' || !msg.payload) return
      dirty.add(msg.payload)
      void flush()
    })
    const retry = () => {
      if (closed || client !== c) return
      client = null
      c.end().catch(() => {})
      const delay = Math.min(5000, 100 * 2 ** backoff++)
      opts.log.warn(`event bridge: LISTEN connection lost; reconnecting in ${delay} ms`)
      setTimeout(() => {
        connect()
          .then(async () => {
            await rewind()
            // Anything committed while we were away: watch again and re-read every tracked stack.
            await renew()
          })
          .catch(retry)
      }, delay).unref()
    }
    c.on('error', retry)
    c.on('end', retry)
    await c.connect()
    await c.query('LISTEN kiln_events')
    client = c
    backoff = 0
  }

  void connect().catch((err) => opts.log.error(`event bridge: ${(err as Error).message}`))

  return {
    get delivered() {
      return delivered
    },
    async track(stackId: string) {
      const { rows } = await opts.pool.query(`SELECT project_id FROM stack WHERE id = $1`, [stackId])
      if (rows[0]) projectOf.set(stackId, String(rows[0].project_id))
      // Watched first: every event after the number it returns is announced.
      const seq = (await watchStackEvents(opts.pool, watcher, [stackId], WATCH_TTL_MS)).get(stackId) ?? 0
      // A stack already served keeps its position: moving it back would send events the
      // room's other members already have (found by the load suite). The new member
      // fetches anything up to the returned seq over REST.
      if (!lastSeq.has(stackId)) lastSeq.set(stackId, seq)
      return lastSeq.get(stackId)!
    },
    async close() {
      closed = true
      clearInterval(renewTimer)
      const c = client
      client = null
      await c?.end().catch(() => {})
    },
  }
}
