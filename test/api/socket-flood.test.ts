/**
 * One tenant's socket cannot slow the others down (lib/server/socket-limits.ts,
 * socket-rooms.ts), on a real web server with real Socket.IO clients:
 *
 *   - a subscribe to a room the socket is in does no database work;
 *   - a socket's joins run one at a time, and messages over the per-socket
 *     limit are refused unhandled (the ack says `rate limited`);
 *   - a socket follows at most MAX_STACK_ROOMS stacks;
 *   - a socket that keeps flooding is told why and disconnected, while
 *     another project's socket and HTTP requests are answered;
 *   - a client that reconnects starts a new count (a browser joining its
 *     room again is no flood).
 *
 * Database work is counted on the web server's own pool: the queries that
 * carry a given stack id as a parameter (the join's checks), leaving out the
 * bridge's reads of events, which its own timers and notifications start.
 */
import crypto from 'node:crypto'
import { io as connect, type Socket } from 'socket.io-client'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createToken } from '../../lib/auth/tokens'
import { createDb, type Db } from '../../lib/db/client'
import type { SubscribeAck } from '../../lib/realtime/contracts'
import { FLOOD_REASON } from '../../lib/server/socket-limits'
import { MAX_STACK_ROOMS } from '../../lib/server/socket-rooms'
import { startApiServer, type ApiServer } from '../helpers/api-server'
import { TestCluster } from '../helpers/cluster'
import { testDatabase, type TestDatabase } from '../helpers/db'

let db: TestDatabase
let c: TestCluster
let api: ApiServer
/** The same server with a small message limit (floods of distinct stacks, reconnects). */
let small: ApiServer
let counted: CountingDb
let aStack: string
let bStack: string
const sockets: Socket[] = []
const SMALL_LIMIT = 20

/** A Db whose pool records every query's parameters, and how many queries naming a watched value ran at once. */
interface CountingDb {
  db: Db
  /** Queries so far with `value` among their parameters (not the bridge's event reads). */
  about(value: string): number
  /** Watch these values for concurrency; returns the most queries naming one of them that ran at once. */
  watch(values: Set<string>): { maxInFlight(): number }
}

function countingDb(url: string): CountingDb {
  const db = createDb(url, { max: 20, application: 'kiln-web' })
  const seen: { text: string; values: unknown[] }[] = []
  let watched = new Set<string>()
  let inFlight = 0
  let maxInFlight = 0
  const query = db.pool.query.bind(db.pool) as (...args: unknown[]) => unknown
  db.pool.query = ((...args: unknown[]) => {
    const config = args[0] as string | { text: string; values?: unknown[] }
    const text = typeof config === 'string' ? config : config.text
    const values = (typeof config === 'string' ? (args[1] as unknown[] | undefined) : config.values) ?? []
    seen.push({ text, values })
    const mine = values.some((v) => typeof v === 'string' && watched.has(v))
    const out = query(...args)
    if (mine && out instanceof Promise) {
      maxInFlight = Math.max(maxInFlight, ++inFlight)
      void out.finally(() => inFlight--).catch(() => {})
    }
    return out
  }) as typeof db.pool.query
  return {
    db,
    about: (value) => seen.filter((q) => !/\bFROM event\b/.test(q.text) && q.values.includes(value)).length,
    watch(values) {
      watched = values
      inFlight = 0
      maxInFlight = 0
      return { maxInFlight: () => maxInFlight }
    },
  }
}

beforeAll(async () => {
  db = await testDatabase()
  c = await TestCluster.start(db.url, { workers: 1 })
  counted = countingDb(db.url)
  // Windows of an hour: none ends while a test counts on it.
  api = await startApiServer(c, { db: counted.db, socketMessageLimit: { messages: 600, windowSeconds: 3600 } })
  small = await startApiServer(c, { db: counted.db, socketMessageLimit: { messages: SMALL_LIMIT, windowSeconds: 3600 } })
  const make = async (token: string, name: string) => {
    const res = await api.call('POST', '/api/stacks', { token, body: { name, template: 'heat_template_version: 2018-08-31\nresources:\n  n:\n    type: OS::Heat::None\n' } })
    expect(res.status).toBe(201)
    await c.settle(res.body.stack.id)
    return String(res.body.stack.id)
  }
  ;[aStack, bStack] = await Promise.all([make(api.a.token, 'a-stack'), make(api.b.token, 'b-stack')])
})
afterAll(async () => {
  for (const s of sockets) s.close()
  await small?.close()
  await api?.close()
  await counted?.db.close()
  await c?.stop()
  await db?.drop()
})

async function open(base: string, token: string, opts: Parameters<typeof connect>[1] = {}): Promise<Socket> {
  const s = connect(base, { transports: ['websocket'], reconnection: false, forceNew: true, auth: { token }, ...opts })
  sockets.push(s)
  await new Promise<void>((resolve, reject) => {
    s.once('connect', resolve)
    s.once('connect_error', reject)
  })
  return s
}

const subscribe = (s: Socket, stackId: string) => s.emitWithAck('stack:subscribe', stackId) as Promise<SubscribeAck>

/**
 * Send `ids.length` subscribes at once; resolves when every one was answered or
 * the server disconnected the socket (whichever comes first), with the answers so far.
 */
function flood(s: Socket, ids: string[]) {
  const acks: SubscribeAck[] = []
  type Closing = { reason: string; retryAfter: number }
  let closing = null as Closing | null
  s.on('socket:closing', (m: Closing) => (closing = m))
  const done = new Promise<{ acks: SubscribeAck[]; disconnect: string | null; closing: Closing | null }>((resolve) => {
    s.once('disconnect', (reason) => resolve({ acks, disconnect: reason, closing }))
    for (const id of ids) {
      s.emit('stack:subscribe', id, (a: SubscribeAck) => {
        acks.push(a)
        if (acks.length === ids.length) resolve({ acks, disconnect: null, closing })
      })
    }
  })
  return done
}

describe('socket subscribes', () => {
  test('a subscribe to a room the socket is in (or is joining) does no database work', async () => {
    const token = (await createToken(c.db, api.b.projectId, `dup-${crypto.randomBytes(3).toString('hex')}`)).secret
    const s = await open(api.url, token)
    const before = counted.about(bStack)
    // The first join and 250 repeats sent with it: the repeats wait for its answer.
    const together = await Promise.all([subscribe(s, bStack), ...Array.from({ length: 250 }, () => subscribe(s, bStack))])
    const first = together[0]!
    expect(first.ok).toBe(true)
    const joinCost = counted.about(bStack) - before
    expect(joinCost).toBeGreaterThan(0)
    // ... and 250 more once it is in the room, in another spelling of the same id too.
    const after = await Promise.all(Array.from({ length: 250 }, (_, i) => subscribe(s, i % 2 ? bStack : bStack.toUpperCase())))
    for (const a of [...together, ...after]) expect(a).toEqual(first)
    expect(counted.about(bStack) - before, 'queries naming the stack: those of one join').toBe(joinCost)
    // Left, the room is joined again with the same checks.
    s.emit('stack:unsubscribe', bStack)
    expect((await subscribe(s, bStack)).ok).toBe(true)
    expect(counted.about(bStack) - before).toBe(2 * joinCost)
  })

  test('joins run one at a time, and messages over the limit do no database work', async () => {
    const s = await open(small.url, api.b.token)
    // The whole allowance at once: answered, one database check after another.
    const allowed = Array.from({ length: SMALL_LIMIT }, () => crypto.randomUUID())
    const watch = counted.watch(new Set(allowed))
    const first = await flood(s, allowed)
    expect(first.disconnect).toBeNull()
    expect(first.acks).toEqual(allowed.map(() => ({ ok: false, error: 'not found' })))
    for (const id of allowed) expect(counted.about(id), `checks of ${id}`).toBe(1)
    expect(watch.maxInFlight(), 'joins of one socket at once').toBe(1)
    // Thousands more: refused, then the socket is closed; none reaches the database.
    const over = Array.from({ length: 2000 }, () => crypto.randomUUID())
    const { acks, disconnect } = await flood(s, over)
    expect(disconnect).toBe('io server disconnect')
    expect(acks.length).toBe(SMALL_LIMIT)
    for (const a of acks) expect(a).toMatchObject({ ok: false, error: 'rate limited' })
    expect(over.filter((id) => counted.about(id) > 0)).toEqual([])
  })
})

describe('stacks one socket follows', () => {
  test(`at most ${MAX_STACK_ROOMS}: one more is refused until the socket leaves one`, async () => {
    const { rows } = await c.db.pool.query(
      `INSERT INTO stack (project_id, name, action, status, timeout_mins)
       SELECT $1, 'many-' || g, 'CREATE', 'COMPLETE', 60 FROM generate_series(1, $2::int) g RETURNING id`,
      [api.b.projectId, MAX_STACK_ROOMS + 1],
    )
    const ids = rows.map((r) => String(r.id))
    const s = await open(api.url, api.b.token)
    for (const id of ids.slice(0, MAX_STACK_ROOMS)) expect((await subscribe(s, id)).ok, id).toBe(true)
    const last = ids.at(-1)!
    expect(await subscribe(s, last)).toEqual({ ok: false, error: `too many stacks: a connection follows at most ${MAX_STACK_ROOMS}; unsubscribe from one first` })
    expect(counted.about(last), 'refused before any database work').toBe(0)
    s.emit('stack:unsubscribe', ids[0])
    expect((await subscribe(s, last)).ok).toBe(true)
  })
})

describe('a flooding socket', () => {
  test('is refused, then disconnected with its reason; another project’s socket and HTTP requests are answered meanwhile', async () => {
    const s = await open(api.url, api.b.token)
    expect((await subscribe(s, bStack)).ok).toBe(true)
    const before = counted.about(bStack)
    const flooding = flood(s, Array.from({ length: 5000 }, () => bStack))
    // Project A, while B floods.
    const a = await open(api.url, api.a.token)
    const [aJoin, aRead, health] = await Promise.all([subscribe(a, aStack), api.call('GET', `/api/stacks/${aStack}`), api.call('GET', '/api/health', { token: null })])
    expect(aJoin.ok).toBe(true)
    expect(aRead.status).toBe(200)
    expect(health.status).toBe(200)

    const { acks, disconnect, closing } = await flooding
    expect(disconnect, 'the server closed the socket').toBe('io server disconnect')
    expect(closing).toMatchObject({ reason: FLOOD_REASON })
    expect(closing!.retryAfter).toBeGreaterThan(0)
    // Answered while within the limit (from memory), then refused with the time to wait.
    const ok = acks.filter((x) => x.ok).length
    const limited = acks.filter((x) => !x.ok && x.error === 'rate limited')
    expect(ok).toBeGreaterThan(0)
    expect(ok).toBeLessThan(600)
    expect(limited.length).toBeGreaterThan(0)
    for (const x of limited) expect(x).toMatchObject({ ok: false, error: 'rate limited', retryAfter: expect.any(Number) })
    expect(ok + limited.length).toBe(acks.length)
    expect(acks.length).toBeLessThan(5000)
    expect(counted.about(bStack) - before, 'the repeats did no database work').toBe(0)

    // A's socket is still served, and B may connect again.
    expect((await subscribe(a, aStack)).ok).toBe(true)
    const again = await open(api.url, api.b.token)
    expect((await subscribe(again, bStack)).ok).toBe(true)
  })

  test('a client that reconnects starts a new count: joining its room again is no flood', async () => {
    const s = connect(small.url, { transports: ['websocket'], forceNew: true, auth: { token: api.b.token }, reconnectionDelay: 10, reconnectionDelayMax: 50 })
    sockets.push(s)
    /** The next connect's join, as the browser sends it on every connect (components/use-stack-live.ts). */
    const joined = () =>
      new Promise<SubscribeAck>((resolve) => {
        s.once('connect', () => void subscribe(s, bStack).then(resolve))
      })
    expect((await joined()).ok).toBe(true)
    // The connection's whole allowance is spent ...
    for (let i = 1; i < SMALL_LIMIT; i++) expect((await subscribe(s, bStack)).ok).toBe(true)
    expect(await subscribe(s, bStack)).toMatchObject({ ok: false, error: 'rate limited' })
    // ... the network drops it; the client reconnects and joins again, as the browser does.
    const rejoined = joined()
    s.io.engine.close()
    expect(await rejoined).toMatchObject({ ok: true })
  })
})
