/**
 * The load driver (load.test.ts, short; `npm run load`, long). Against the
 * production web process (server.ts in its own process, so the load
 * generator does not share its event loop) and real workers: `clients` HTTP
 * loops read stacks, resources and events while `sockets` Socket.IO clients
 * follow stacks whose traversals run, for `seconds`. Reports requests per
 * second, API latency percentiles, event delivery latency (from the event's
 * transaction time in PostgreSQL to its arrival on a socket) and whether any
 * socket missed an event (every socket must see every seq of its stack).
 */
import { io as connect, type Socket } from 'socket.io-client'
import { benchTemplate } from '../../bench/shapes'
import type { TestCluster } from '../helpers/cluster'

export interface LoadOptions {
  url: string
  token: string
  clients: number
  sockets: number
  stacks: number
  seconds: number
}

export interface LoadReport {
  requests: number
  errors: number
  requestsPerSecond: number
  apiMs: { p50: number; p95: number; p99: number; max: number }
  events: number
  eventMs: { p50: number; p95: number; p99: number; max: number }
  /** events a socket should have seen but did not (must be 0) */
  dropped: number
  /** events a socket saw twice or out of order (must be 0) */
  disordered: number
}

function pct(xs: number[]) {
  const s = [...xs].sort((a, b) => a - b)
  const at = (p: number) => (s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : 0)
  return { p50: at(50), p95: at(95), p99: at(99), max: s.at(-1) ?? 0 }
}

export async function runLoad(c: TestCluster, o: LoadOptions): Promise<LoadReport> {
  const headers = { 'content-type': 'application/json', 'x-auth-token': o.token }
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(o.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
    const text = await res.text()
    return { status: res.status, body: text ? JSON.parse(text) : null }
  }

  // Stacks whose traversals run during the load: created now, updated halfway.
  const ids: string[] = []
  for (let i = 0; i < o.stacks; i++) {
    const r = await call('POST', '/api/stacks', { name: `load-${Date.now()}-${i}`, template: benchTemplate('layered', 100, 0.05, { value: 'a', replace: false }) })
    if (r.status !== 201) throw new Error(`create failed: ${r.status} ${JSON.stringify(r.body)}`)
    ids.push(r.body.stack.id)
  }

  // Sockets: each follows one stack from the seq its subscription starts after.
  const followers: { socket: Socket; stackId: string; seqs: number[]; from: number }[] = []
  const eventLatency: number[] = []
  await Promise.all(
    Array.from({ length: o.sockets }, async (_, i) => {
      const stackId = ids[i % ids.length]!
      const socket = connect(o.url, { transports: ['websocket'], auth: { token: o.token }, reconnection: false })
      const f = { socket, stackId, seqs: [] as number[], from: 0 }
      socket.on('stack:events', (msg: { stackId: string; events: { seq: number; at: string }[] }) => {
        if (msg.stackId !== stackId) return
        const now = Date.now()
        for (const e of msg.events) {
          f.seqs.push(e.seq)
          eventLatency.push(now - Date.parse(e.at))
        }
      })
      await new Promise<void>((resolve, reject) => {
        socket.on('connect_error', reject)
        socket.on('connect', () =>
          socket.emit('stack:subscribe', stackId, (ack: { ok: boolean; lastSeq?: number; error?: string }) => {
            if (!ack.ok) return reject(new Error(ack.error))
            f.from = ack.lastSeq ?? 0
            resolve()
          }),
        )
      })
      followers.push(f)
    }),
  )

  // HTTP clients.
  const latencies: number[] = []
  let errors = 0
  const deadline = Date.now() + o.seconds * 1000
  const paths = (id: string) => ['/api/stacks?limit=20', `/api/stacks/${id}`, `/api/stacks/${id}/resources`, `/api/stacks/${id}/events?limit=100`, `/api/stacks/${id}/traversals`]
  let updated = false
  const started = Date.now()
  await Promise.all(
    Array.from({ length: o.clients }, async (_, i) => {
      let n = i
      while (Date.now() < deadline) {
        if (!updated && Date.now() > started + (o.seconds * 1000) / 3) {
          updated = true
          // an update of every stack mid-load: more traversal events while reads go on
          for (const id of ids) await call('PUT', `/api/stacks/${id}`, { template: benchTemplate('layered', 100, 0.05, { value: 'b', replace: false }) })
        }
        const id = ids[n % ids.length]!
        const p = paths(id)[n % 5]!
        n++
        const t = performance.now()
        try {
          const r = await call('GET', p)
          if (r.status !== 200) errors++
        } catch {
          errors++
        }
        latencies.push(performance.now() - t)
      }
    }),
  )
  const elapsed = (Date.now() - started) / 1000

  // Let the traversals finish, then every socket must have seen every event of its stack.
  for (const id of ids) await c.settle(id, 120_000)
  const lastSeq = new Map<string, number>()
  for (const id of ids) lastSeq.set(id, Number((await c.db.pool.query('SELECT kiln_last_seq($1) AS seq', [id])).rows[0].seq))
  await c.waitFor(async () => followers.every((f) => (f.seqs.at(-1) ?? f.from) >= lastSeq.get(f.stackId)!), 15_000, 'sockets to catch up').catch(() => {})
  let dropped = 0
  let disordered = 0
  for (const f of followers) {
    const want = lastSeq.get(f.stackId)! - f.from
    const seen = new Set(f.seqs)
    dropped += Math.max(0, want - [...seen].filter((s) => s > f.from).length)
    // Events up to the subscription's starting seq may arrive too (the room is joined before
    // that seq is read, so nothing falls between); after it, every seq exactly once, in order.
    const after = f.seqs.filter((s) => s > f.from)
    for (let k = 0; k < after.length; k++) if (after[k] !== (k === 0 ? f.from : after[k - 1]!) + 1) disordered++
    f.socket.close()
  }
  return {
    requests: latencies.length,
    errors,
    requestsPerSecond: Math.round(latencies.length / elapsed),
    apiMs: pct(latencies.map((x) => Math.round(x * 10) / 10)),
    events: eventLatency.length,
    eventMs: pct(eventLatency),
    dropped,
    disordered,
  }
}
