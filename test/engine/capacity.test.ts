/**
 * Workers with fewer job slots than ready nodes. A worker claims again when a
 * slot frees up only if its last claim round was cut short by capacity (it
 * filled every slot, or a NOTIFY came while all were busy); otherwise a freed
 * slot claims nothing (worker/claim-loop.ts, `wanted`). If that bookkeeping missed a
 * case, the jobs left in the queue would wait for a NOTIFY that never comes and
 * the stack would never settle: these tests would time out.
 */
import { afterAll, beforeAll, expect, test } from 'vitest'
import { testDatabase, type TestDatabase } from '../helpers/db'
import { TestCluster } from '../helpers/cluster'
import { openGate } from '../helpers/gate'

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

/**
 * `wide` independent nodes and a chain of `chained`, and beside them three wait conditions g0..g2 on
 * one handle, each needing `gateCount` signals: while they wait they fill more slots than one worker
 * has, so both workers hold some of them, however the machine schedules the workers.
 */
function template(wide: number, chained: number, value: string, gateCount: number): string {
  const resources: Record<string, unknown> = { gate_handle: { type: 'OS::Heat::WaitConditionHandle' } }
  for (let i = 0; i < GATED; i++) resources[`g${i}`] = { type: 'OS::Heat::WaitCondition', properties: { handle: { get_resource: 'gate_handle' }, count: gateCount, timeout: 3600 } }
  for (let i = 0; i < wide; i++) resources[`w${i}`] = { type: 'OS::Heat::TestResource', properties: { value: `${value}-${i}`, wait_secs: 0.03 } }
  // A chain beside them: its successors are begun inline, so its slot stays busy.
  for (let i = 0; i < chained; i++)
    resources[`c${i}`] = { type: 'OS::Heat::TestResource', properties: { value: `${value}-${i}`, wait_secs: 0.03 }, ...(i ? { depends_on: [`c${i - 1}`] } : {}) }
  return JSON.stringify({ heat_template_version: '2018-08-31', resources })
}

const GATED = 3

/** Until the three wait conditions are all waiting, in `traversalId`: held by both workers (two slots each). */
const gatesHeld = (stackId: string, traversalId: string) =>
  c.waitFor(
    async () => (await c.db.pool.query(`SELECT count(*)::int AS n FROM resource WHERE stack_id = $1 AND name LIKE 'g%' AND status = 'IN_PROGRESS' AND engine_id IS NOT NULL AND lock_traversal_id = $2`, [stackId, traversalId])).rows[0].n === GATED,
    30_000,
    `the wait conditions of ${traversalId} to wait`,
  )

async function ranBy(traversalId: string): Promise<number> {
  const { rows } = await c.db.pool.query(
    `SELECT count(DISTINCT data->>'worker')::int AS n FROM event WHERE traversal_id = $1 AND data->>'lock' = 'acquired'`,
    [traversalId],
  )
  return rows[0].n
}

test('24 independent nodes and a chain of 6 on two workers of two slots each: every queued job is claimed as slots free up', async () => {
  const res = await c.services.create(c.actor, { name: 'narrow', template: template(24, 6, 'a', 1) })
  await gatesHeld(res.stack.id, res.traversalId!)
  await openGate(c, res.stack.id)
  expect(await c.settle(res.stack.id, 30_000)).toBe('CREATE_COMPLETE')
  const rows = await c.rows(res.stack.id)
  expect(rows).toHaveLength(30 + 1 + GATED)
  expect(rows.every((r) => r.action === 'CREATE' && r.status === 'COMPLETE')).toBe(true)
  expect(await ranBy(res.traversalId!)).toBe(2)

  // Again as an update (cleanup nodes too), twice, the second submitted while the first runs.
  // Each raises the wait conditions' count: the second update's waits hold until the third signal.
  const first = await c.services.update(c.actor, res.stack.id, { template: template(24, 6, 'b', 2) })
  const second = await c.services.update(c.actor, res.stack.id, { template: template(24, 6, 'c', 3) })
  expect(second.superseded).toBe(first.traversalId)
  await openGate(c, res.stack.id)
  await gatesHeld(res.stack.id, second.traversalId!)
  await openGate(c, res.stack.id)
  expect(await c.settle(res.stack.id, 30_000)).toBe('UPDATE_COMPLETE')
  const after = await c.rows(res.stack.id)
  expect(after.filter((r) => r.action !== 'DELETE' && /^[wc]\d/.test(r.name)).map((r) => r.properties?.value).sort()).toEqual(
    [...Array.from({ length: 24 }, (_, i) => `c-${i}`), ...Array.from({ length: 6 }, (_, i) => `c-${i}`)].sort(),
  )
  expect(after.filter((r) => r.engine_id !== null)).toEqual([])
  expect(await ranBy(second.traversalId!)).toBe(2)
})
