/**
 * Workers with fewer job slots than ready nodes. A worker claims again when a
 * slot frees up only if its last claim round was cut short by capacity (it
 * filled every slot, or a NOTIFY came while all were busy); otherwise a freed
 * slot claims nothing (worker/runtime.ts, `wanted`). If that bookkeeping missed a
 * case, the jobs left in the queue would wait for a NOTIFY that never comes and
 * the stack would never settle: these tests would time out.
 */
import { afterAll, beforeAll, expect, test } from 'vitest'
import { testDatabase, type TestDatabase } from '../helpers/db'
import { TestCluster } from '../helpers/cluster'

let db: TestDatabase
let c: TestCluster

beforeAll(async () => {
  db = await testDatabase()
  c = await TestCluster.start(db.url, { workers: 2, leaseMs: 1500, concurrency: 2 })
})
afterAll(async () => {
  await c?.stop()
  await db?.drop()
})

function template(wide: number, chained: number, value: string): string {
  const resources: Record<string, unknown> = {}
  for (let i = 0; i < wide; i++) resources[`w${i}`] = { type: 'OS::Heat::TestResource', properties: { value: `${value}-${i}`, wait_secs: 0.03 } }
  // A chain beside them: its successors are begun inline, so its slot stays busy.
  for (let i = 0; i < chained; i++)
    resources[`c${i}`] = { type: 'OS::Heat::TestResource', properties: { value: `${value}-${i}`, wait_secs: 0.03 }, ...(i ? { depends_on: [`c${i - 1}`] } : {}) }
  return JSON.stringify({ heat_template_version: '2018-08-31', resources })
}

async function ranBy(traversalId: string): Promise<number> {
  const { rows } = await c.db.pool.query(
    `SELECT count(DISTINCT data->>'worker')::int AS n FROM event WHERE traversal_id = $1 AND data->>'lock' = 'acquired'`,
    [traversalId],
  )
  return rows[0].n
}

test('24 independent nodes and a chain of 6 on two workers of two slots each: every queued job is claimed as slots free up', async () => {
  const res = await c.services.create(c.actor, { name: 'narrow', template: template(24, 6, 'a') })
  expect(await c.settle(res.stack.id, 30_000)).toBe('CREATE_COMPLETE')
  const rows = await c.rows(res.stack.id)
  expect(rows).toHaveLength(30)
  expect(rows.every((r) => r.action === 'CREATE' && r.status === 'COMPLETE')).toBe(true)
  expect(await ranBy(res.traversalId!)).toBe(2)

  // Again as an update (cleanup nodes too), twice, the second submitted while the first runs.
  await c.services.update(c.actor, res.stack.id, { template: template(24, 6, 'b') })
  const second = await c.services.update(c.actor, res.stack.id, { template: template(24, 6, 'c') })
  expect(await c.settle(res.stack.id, 30_000)).toBe('UPDATE_COMPLETE')
  const after = await c.rows(res.stack.id)
  expect(after.filter((r) => r.action !== 'DELETE').map((r) => r.properties?.value).sort()).toEqual(
    [...Array.from({ length: 24 }, (_, i) => `c-${i}`), ...Array.from({ length: 6 }, (_, i) => `c-${i}`)].sort(),
  )
  expect(after.filter((r) => r.engine_id !== null)).toEqual([])
  expect(await ranBy(second.traversalId!)).toBe(2)
})
