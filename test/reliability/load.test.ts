/**
 * Load, short version (the long one: `npm run load`): concurrent API clients
 * and live sockets against the production web process while traversals run.
 * Nothing may fail and no socket may miss an event; the figures are printed
 * (speed targets live in benchmarks, not in assertions).
 */
import { afterAll, beforeAll, expect, test } from 'vitest'
import { makeProject } from '../helpers/api-server'
import { TestCluster } from '../helpers/cluster'
import { testDatabase, type TestDatabase } from '../helpers/db'
import { startWebServer, type WebServer } from '../helpers/web-server'
import { runLoad } from './load'

let db: TestDatabase
let c: TestCluster
let web: WebServer

beforeAll(async () => {
  db = await testDatabase()
  c = await TestCluster.start(db.url, { workers: 2, leaseMs: 3000 })
  web = await startWebServer(c)
}, 180_000)
afterAll(async () => {
  await web?.close()
  await c?.stop()
  await db?.drop()
})

test('concurrent API clients and sockets while traversals run: no errors, no event dropped', { timeout: 180_000 }, async () => {
  const a = await makeProject(c, 'admin')
  const report = await runLoad(c, { url: web.url, token: a.token, clients: 10, sockets: 20, stacks: 3, seconds: 5 })
  console.log(`load: ${JSON.stringify(report)}`)
  expect(report.requests).toBeGreaterThan(50)
  expect(report.errors).toBe(0)
  expect(report.events).toBeGreaterThan(0)
  expect(report.dropped).toBe(0)
  expect(report.disordered).toBe(0)
})
