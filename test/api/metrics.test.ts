/**
 * GET /metrics in Prometheus's text format: the web server's (admin tokens
 * only: API latency by route, event delivery lag, and the database-wide
 * gauges) and a worker's on a port of its own (node steps by outcome,
 * sweeper actions, lease breaks).
 */
import net from 'node:net'
import { io as connect, type Socket } from 'socket.io-client'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startApiServer, type ApiServer } from '../helpers/api-server'
import { TestCluster } from '../helpers/cluster'
import { testDatabase, type TestDatabase } from '../helpers/db'

let db: TestDatabase
let c: TestCluster
let api: ApiServer
let workerPort: number

const freePort = () =>
  new Promise<number>((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (srv.address() as net.AddressInfo).port
      srv.close(() => resolve(p))
    })
  })

beforeAll(async () => {
  db = await testDatabase()
  c = await TestCluster.start(db.url, { workers: 0 })
  workerPort = await freePort()
  c.spawnWorker({ KILN_WORKER_METRICS_PORT: String(workerPort), HOST: '127.0.0.1' })
  await c.waitFor(async () => (await c.liveWorkers()) >= 1, 30_000, 'the worker to register')
  api = await startApiServer(c)
}, 120_000)

afterAll(async () => {
  await api?.close()
  await c?.stop()
  await db?.drop()
})

/** The value of a sample line `name{labels} value` (labels matched as given), or undefined. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue
    const m = /^([a-z_]+)(\{[^}]*\})? (\S+)$/.exec(line)
    if (!m || m[1] !== name) continue
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]))
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3])
  }
  return undefined
}

describe('metrics', () => {
  test('the web server’s: admin tokens only; the database gauges, API latency by route pattern, event delivery lag', async () => {
    expect((await api.call('GET', '/metrics', { token: null })).status).toBe(401)
    expect((await api.call('GET', '/metrics', { token: api.b.token })).status).toBe(403)

    const created = await api.call('POST', '/api/stacks', {
      body: { name: 'metered', template: { heat_template_version: '2018-08-31', resources: { a: { type: 'OS::Heat::Value', properties: { value: 1 } } } } },
    })
    expect(created.status, created.text).toBe(201)
    const stackId = created.body.stack.id as string
    // A socket following the stack: its events pass through the bridge, which times their delivery.
    const s: Socket = connect(api.url, { transports: ['websocket'], reconnection: false, forceNew: true, auth: { token: api.a.token } })
    try {
      await new Promise<void>((resolve, reject) => {
        s.once('connect', resolve)
        s.once('connect_error', reject)
      })
      const delivered = new Promise<void>((resolve) => s.on('stack:events', () => resolve()))
      expect(await new Promise<{ ok: boolean }>((resolve) => s.emit('stack:subscribe', stackId, resolve))).toMatchObject({ ok: true })
      expect(await c.settle(stackId)).toBe('CREATE_COMPLETE')
      // An update after subscribing, so that events certainly reach the room (forced: the template is unchanged).
      expect((await api.call('PATCH', `/api/stacks/${stackId}`, { body: { parameters: {}, force: true } })).status).toBe(202)
      await delivered
      expect(await c.settle(stackId)).toBe('UPDATE_COMPLETE')
    } finally {
      s.close()
    }

    const res = await api.call('GET', '/metrics')
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/)
    const text = res.text
    expect(sample(text, 'kiln_workers_live')).toBe(1)
    expect(sample(text, 'kiln_traversals_running')).toBe(0)
    expect(sample(text, 'kiln_queue_depth')).toBe(0)
    expect(sample(text, 'kiln_queue_oldest_ready_seconds')).toBe(0)
    expect(sample(text, 'kiln_api_request_duration_seconds_count', { route: '/api/stacks', method: 'POST', status: '2xx' })).toBe(1)
    expect(sample(text, 'kiln_api_request_duration_seconds_count', { route: '/metrics', method: 'GET', status: '4xx' })).toBe(2)
    expect(sample(text, 'kiln_event_delivery_lag_seconds_count')).toBeGreaterThan(0)
    // Routes are labelled by pattern, never by path: no stack id in any label.
    expect(text).not.toContain(stackId)
  })

  test('a worker’s, on its own port: node steps by outcome and the sweeper’s counters', async () => {
    const res = await fetch(`http://127.0.0.1:${workerPort}/metrics`)
    expect(res.status).toBe(200)
    const text = await res.text()
    // The create and the update above, one node each, ran on this worker.
    const steps = ['done', 'unchanged', 'created', 'updated']
      .map((outcome) => sample(text, 'kiln_node_steps_total', { outcome }) ?? 0)
      .reduce((a, b) => a + b, 0)
    expect(steps).toBeGreaterThanOrEqual(2)
    expect(sample(text, 'kiln_lease_breaks_total')).toBe(0)
    expect(text).toContain('kiln_sweeper_actions_total')
    expect((await fetch(`http://127.0.0.1:${workerPort}/elsewhere`)).status).toBe(404)
  })
})
