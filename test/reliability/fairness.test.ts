/**
 * Fair share between projects, with real worker processes: project B floods
 * the installation (waits, long actions, a deep queue of ready nodes) and
 * project A's small stack still runs.
 *
 *   - B's 24 wait conditions park: they hold none of the workers' 8 slots.
 *   - B's 16 actions that run for an hour take at most 3 of each worker's 4
 *     slots (KILN_PROJECT_SLOT_SHARE, 75 %): the fourth stays free for others.
 *   - B's 300 ready nodes, queued before A's, wait for B's own share.
 *   - 500 of B's wait conditions parked at once leave the 8 slots free.
 * A's create completes while all of that holds (no timer decides it: on a
 * worker that gave B every slot, it would wait the hour). B's work then
 * completes too. test/db/fair-claim.test.ts shows the turns a claim takes
 * between projects' queues. `npm run bench:fairness` measures the time A's create takes.
 */
import crypto from 'node:crypto'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { createSignalService } from '../../lib/services/signals'
import type { Actor } from '../../lib/services/stacks'
import { TestCluster } from '../helpers/cluster'
import { testDatabase, type TestDatabase } from '../helpers/db'
import { gateResources } from '../helpers/gate'

let db: TestDatabase
let c: TestCluster
let b: Actor

beforeAll(async () => {
  db = await testDatabase()
  c = await TestCluster.start(db.url, { workers: 2, concurrency: 4 })
  const { rows } = await c.db.pool.query(`INSERT INTO project (name) VALUES ($1) RETURNING id`, [`b-${crypto.randomBytes(3).toString('hex')}`])
  b = { projectId: rows[0].id, name: 'b' }
}, 120_000)

afterAll(async () => {
  await c?.stop()
  await db?.drop()
})

function resources(n: number, def: (i: number) => Record<string, unknown>) {
  return Object.fromEntries(Array.from({ length: n }, (_, i) => [`r${i}`, def(i)]))
}

const template = (res: Record<string, unknown>) => ({ heat_template_version: '2018-08-31', resources: res })

async function count(sql: string, params: unknown[]): Promise<number> {
  return (await c.db.pool.query(sql, params)).rows[0].n as number
}

test('one project’s waits, long actions and deep queue leave another project’s create a slot and a turn', async () => {
  const waits = (await c.services.create(b, { name: 'waits', template: template(Object.assign({}, ...Array.from({ length: 24 }, (_, i) => gateResources(`g${i}`)))) })).stack.id
  await c.waitFor(async () => (await count(`SELECT count(*)::int AS n FROM job WHERE stack_id = $1 AND parked_until IS NOT NULL`, [waits])) === 24, 60_000, 'B’s 24 waits to park')

  const long = (await c.services.create(b, { name: 'long', template: template(resources(16, () => ({ type: 'OS::Heat::TestResource', properties: { action_wait_secs: { create: 3600 } } }))) })).stack.id
  // Each worker gives B three of its four slots, and no more.
  await c.waitFor(async () => (await count(`SELECT count(*)::int AS n FROM job WHERE stack_id = $1 AND locked_by IS NOT NULL`, [long])) === 6, 60_000, 'B’s long actions to take their share')
  const queue = (await c.services.create(b, { name: 'queue', template: template(resources(300, () => ({ type: 'OS::Heat::None' }))) })).stack.id

  const a = (await c.services.create(c.actor, { name: 'small', template: template({ x: { type: 'OS::Heat::TestResource' }, y: { type: 'OS::Heat::TestResource', properties: { value: { get_attr: ['x', 'output'] } } } }) })).stack.id
  expect(await c.settle(a)).toBe('CREATE_COMPLETE')

  // All of B's flood was still there while A ran: its waits parked, its long actions at their share.
  expect((await c.stack(waits)).status).toBe('IN_PROGRESS')
  expect((await c.stack(long)).status).toBe('IN_PROGRESS')
  expect(await count(`SELECT count(*)::int AS n FROM job WHERE stack_id = $1 AND locked_by IS NOT NULL`, [long])).toBe(6)

  // B's queue waits behind B's own long actions (its share is theirs); B's work completes once they go.
  expect((await c.stack(queue)).status).toBe('IN_PROGRESS')
  await c.services.delete(b, long)
  expect(await c.settle(long)).toBe('DELETE_COMPLETE')
  expect(await c.settle(queue, 120_000)).toBe('CREATE_COMPLETE')
  const signals = createSignalService(c.db.pool)
  for (let i = 0; i < 24; i++) await signals.signal({ projectId: b.projectId }, waits, `g${i}_handle`, {})
  expect(await c.settle(waits)).toBe('CREATE_COMPLETE')
}, 300_000)

test('500 wait conditions parked at once hold no slot: another project’s stack completes while they wait', async () => {
  const waits = (await c.services.create(b, { name: 'five-hundred', template: template(Object.assign({}, ...Array.from({ length: 500 }, (_, i) => gateResources(`w${i}`)))) })).stack.id
  await c.waitFor(async () => (await count(`SELECT count(*)::int AS n FROM job WHERE stack_id = $1 AND parked_until IS NOT NULL`, [waits])) === 500, 120_000, 'B’s 500 waits to park')
  // Eight slots in all, five hundred waits: A's create can only run if the waits hold none of them.
  const a = (await c.services.create(c.actor, { name: 'beside-500', template: template({ x: { type: 'OS::Heat::TestResource' }, y: { type: 'OS::Heat::TestResource', properties: { value: { get_attr: ['x', 'output'] } } } }) })).stack.id
  expect(await c.settle(a)).toBe('CREATE_COMPLETE')
  expect(await count(`SELECT count(*)::int AS n FROM job WHERE stack_id = $1 AND parked_until IS NOT NULL`, [waits]), 'all 500 still parked').toBe(500)
  expect((await c.stack(waits)).status).toBe('IN_PROGRESS')
  await c.services.delete(b, waits)
  expect(await c.settle(waits, 120_000)).toBe('DELETE_COMPLETE')
}, 300_000)
