/**
 * A worker started while its database is down (a restart, or workers that
 * come up before PostgreSQL) waits for it instead of exiting: `npm start`
 * restarts a worker at most five times a minute, and the chaos killer only
 * replaces the workers it killed.
 */
import { afterAll, beforeAll, expect, test } from 'vitest'
import { TestCluster } from '../helpers/cluster'
import { ownPostgres, type OwnPostgres } from '../helpers/own-postgres'

let pg: OwnPostgres
let c: TestCluster
beforeAll(async () => {
  pg = await ownPostgres('worker-start')
  c = await TestCluster.start(pg.url, { workers: 0 })
}, 60_000)
afterAll(async () => {
  await c?.stop()
  await pg?.stop()
})

test('a worker started while PostgreSQL is down waits for it, then runs traversals', { timeout: 90_000 }, async () => {
  await pg.down()
  const w = c.spawnWorker()
  // Held down until the worker has met it down (or exited).
  await c.waitFor(async () => /database not reachable yet/.test(w.output.join('')) || w.proc.exitCode !== null, 60_000, 'the worker to find the database down', 100)
  await pg.up()
  await c.waitFor(async () => w.id !== null || w.proc.exitCode !== null, 60_000, 'the worker to start or exit', 100)
  expect(w.proc.exitCode, w.output.join('')).toBeNull()
  expect(w.output.join('')).toMatch(/database not reachable yet/)

  // Its first query after the restart may meet a connection the restart closed.
  let created: { stack: { id: string } } | null = null
  for (let i = 0; i < 20 && !created; i++) {
    created = await c.services.create(c.actor, { name: 'after-restart', template: 'heat_template_version: 2018-08-31\nresources:\n  a: {type: OS::Heat::None}\n' }).catch(() => null)
    if (!created) await new Promise((r) => setTimeout(r, 250))
  }
  expect(await c.settle(created!.stack.id)).toBe('CREATE_COMPLETE')
})
