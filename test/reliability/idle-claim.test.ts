/**
 * The safety net under NOTIFY. A worker's LISTEN connection can die without
 * telling anyone: a half-open TCP connection (a network partition, a NAT
 * that forgot it) reports no error and no end, and notifications sent to it
 * are lost. The worker must still claim queued work, on its idle-claim timer
 * (KILN_IDLE_CLAIM_MS), say so in its log, and then find out that the
 * connection no longer answers and replace it. And its shutdown must not
 * wait forever for that connection's goodbye.
 *
 * The worker reaches PostgreSQL through a proxy that freezes its LISTEN
 * session: bytes are dropped both ways, the socket stays open.
 */
import { afterAll, beforeAll, expect, test } from 'vitest'
import { TestCluster } from '../helpers/cluster'
import { testDatabase, type TestDatabase } from '../helpers/db'
import { tcpProxy, type TcpProxy } from '../helpers/tcp-proxy'

let db: TestDatabase
let proxy: TcpProxy
let c: TestCluster
beforeAll(async () => {
  db = await testDatabase()
  proxy = await tcpProxy(db.url)
  c = await TestCluster.start(db.url, { workers: 0, env: { DATABASE_URL: proxy.url, KILN_IDLE_CLAIM_MS: '1000' } })
}, 60_000)
afterAll(async () => {
  await c?.stop()
  await proxy?.close()
  await db?.drop()
})

const ONE_NODE = 'heat_template_version: 2018-08-31\nresources:\n  a: {type: OS::Heat::None}\n'

const listenSessions = async () =>
  Number((await c.db.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'kiln-worker-listen' AND datname = current_database()`)).rows[0].n)

test('a worker whose LISTEN connection went silent still claims queued work on its idle timer, then replaces the connection', { timeout: 120_000 }, async () => {
  const w = c.spawnWorker()
  await c.waitFor(async () => w.id !== null, 30_000, 'the worker to start', 100)
  await c.waitFor(async () => (await listenSessions()) === 1, 30_000, 'the worker to LISTEN', 100)
  expect(proxy.freeze('kiln-worker-listen')).toBe(1)

  // Its job's NOTIFY reaches a session whose bytes go nowhere.
  const res = await c.services.create(c.actor, { name: 'unannounced', template: ONE_NODE })
  expect(await c.settle(res.stack.id)).toBe('CREATE_COMPLETE')
  const out = () => w.output.join('')
  expect(out()).toMatch(/claimed 1 job\(s\) on the idle timer: no notification or claim for \d+ ms/)

  // The claim that found work it was not told about asks the connection for an answer; silence replaces it.
  await c.waitFor(async () => /worker: LISTEN connection back/.test(out()), 60_000, 'the LISTEN connection to be replaced', 200)
  expect(out()).toMatch(/worker: LISTEN connection lost \(no answer to a ping within \d+ ms\)/)
  const next = await c.services.create(c.actor, { name: 'announced', template: ONE_NODE })
  expect(await c.settle(next.stack.id)).toBe('CREATE_COMPLETE')
  expect(w.proc.exitCode).toBeNull()

  const exited = new Promise((resolve) => w.proc.once('exit', resolve))
  w.proc.kill('SIGTERM')
  await exited
})

test('a worker whose LISTEN connection went silent still stops on SIGTERM', { timeout: 120_000 }, async () => {
  const w = c.spawnWorker()
  await c.waitFor(async () => w.id !== null, 30_000, 'the worker to start', 100)
  await c.waitFor(async () => (await listenSessions()) === 1, 30_000, 'the worker to LISTEN', 100)
  expect(proxy.freeze('kiln-worker-listen')).toBe(1)
  const exited = new Promise<number | null>((resolve) => w.proc.once('exit', (code) => resolve(code)))
  w.proc.kill('SIGTERM')
  // Its goodbye to a connection that never answers is bounded: the drain ends and the process exits.
  expect(await exited).toBe(0)
  expect(w.output.join('')).not.toMatch(/exiting now/)
})
