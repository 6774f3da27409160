/**
 * A tenant's template never blocks a worker: a node whose properties need
 * quadratic (before) or unbounded work is evaluated off the worker's event
 * loop under the budgets and fails with the budget's name, while another
 * project's stack converges beside it on the same worker processes.
 */
import { afterAll, beforeAll, expect, test } from 'vitest'
import { chain, runtimeBombs } from '../../bench/bomb-templates'
import { TestCluster } from '../helpers/cluster'
import { testDatabase, type TestDatabase } from '../helpers/db'

let db: TestDatabase
let c: TestCluster

beforeAll(async () => {
  db = await testDatabase()
  c = await TestCluster.start(db.url, { workers: 2, leaseMs: 2000 })
})
afterAll(async () => {
  await c?.stop()
  await db?.drop()
})

const resources = async (stackId: string) =>
  Object.fromEntries((await c.db.pool.query(`SELECT name, action, status, status_reason, properties FROM resource WHERE stack_id = $1`, [stackId])).rows.map((r) => [r.name, r]))

test("a run-time bomb fails its own node, naming the budget; another project's stack converges on the same workers meanwhile", { timeout: 120_000 }, async () => {
  const other = { projectId: (await c.db.pool.query(`INSERT INTO project (name) VALUES ('beside') RETURNING id`)).rows[0].id as string, name: 'beside' }
  const bombs = await c.services.create(c.actor, { name: 'runtime-bombs', template: runtimeBombs(80_000) })
  const beside = await c.services.create(other, { name: 'beside', template: chain(10, 0.1) })
  const [bombed, converged] = await Promise.all([c.settle(bombs.stack.id, 90_000), c.settle(beside.stack.id, 90_000)])
  expect(converged).toBe('CREATE_COMPLETE')
  expect(bombed).toBe('CREATE_FAILED')
  const rows = await resources(bombs.stack.id)
  // Quadratic before (80,000 items, each compared with all the others): now linear, and done.
  expect(rows.unique).toMatchObject({ action: 'CREATE', status: 'COMPLETE' })
  expect((rows.unique.properties.value as string[]).length).toBe(80_000)
  // 80,000 x 80,000 copies: past the budget, refused before a copy is made.
  expect(rows.bomb).toMatchObject({ action: 'CREATE', status: 'FAILED' })
  expect(rows.bomb.status_reason).toMatch(/exceeded its budget of 1000000 operations \(KILN_TEMPLATE_EVAL_MAX_OPS\) at resources\.bomb\.properties\.value\.repeat/)
  // No worker missed a heartbeat long enough to lose a lock: nothing was taken over, every worker lives.
  const broken = await c.db.pool.query(`SELECT count(*)::int AS n FROM event WHERE data->>'lock' = 'broken'`)
  expect(broken.rows[0].n).toBe(0)
  const dead = await c.db.pool.query(`SELECT count(*)::int AS n FROM worker WHERE state = 'dead'`)
  expect(dead.rows[0].n).toBe(0)
  expect(await c.liveWorkers()).toBe(2)
  for (const w of c.workers) expect(w.proc.exitCode).toBeNull()
})
