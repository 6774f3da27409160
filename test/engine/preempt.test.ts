/**
 * Preemption: an update stuck in a 10-minute action (OS::Heat::TestResource
 * waiting 600 s on update) is superseded by an update with `preempt`; the
 * stuck action is aborted through its AbortSignal (NOTIFY kiln_abort, mode
 * rows), the new traversal converges the row it left, and nothing leaks: no
 * lock, no job, no sync point, one row per resource. Only the rows whose
 * targets changed are aborted; without preempt the new update waits for the
 * stuck one (blocked). Gates, never sleeps: the test waits for the row to be
 * UPDATE_IN_PROGRESS (its action is then waiting), and asserts outcomes.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { changedTargets } from '../../lib/engine/preempt'
import { TestCluster } from '../helpers/cluster'
import { testDatabase, type TestDatabase } from '../helpers/db'

describe('which targets an update changes', () => {
  test('a changed or removed definition, and whatever depends on one (in the new template)', () => {
    const before = { dependsOn: { a: [], b: ['a'], c: [], d: ['c'], gone: [] }, fingerprints: { a: '1', b: '2', c: '3', d: '4', gone: '5' } }
    const after = { dependsOn: { a: [], b: ['a'], c: [], d: ['c'], added: ['a'] }, fingerprints: { a: '1*', b: '2', c: '3', d: '4', added: '6' } }
    expect(changedTargets(before, after)).toEqual(['a', 'b', 'gone'])
    expect(changedTargets(before, { ...before })).toEqual([])
  })
})

let db: TestDatabase
let c: TestCluster

beforeAll(async () => {
  db = await testDatabase()
  c = await TestCluster.start(db.url, { workers: 2 })
}, 120_000)

afterAll(async () => {
  await c?.stop()
  await db?.drop()
})

const tr = (value: string, updateWait: number) => ({ type: 'OS::Heat::TestResource', properties: { value, action_wait_secs: { update: updateWait } } })
const template = (resources: Record<string, unknown>) => ({ heat_template_version: '2018-08-31', resources })

/** Wait until the named rows are UPDATE_IN_PROGRESS: their 600 s actions are running. */
const stuck = (id: string, names: string[]) =>
  c.waitFor(async () => (await c.rows(id)).filter((r) => names.includes(r.name) && r.action === 'UPDATE' && r.status === 'IN_PROGRESS').length === names.length, 30_000, `${names.join(', ')} to be stuck in their updates`)

async function leftovers(id: string) {
  const q = async (sql: string) => Number((await c.db.pool.query(sql, [id])).rows[0].n)
  return {
    locked: await q(`SELECT count(*) AS n FROM resource WHERE stack_id = $1 AND engine_id IS NOT NULL`),
    jobs: await q(`SELECT count(*) AS n FROM job WHERE stack_id = $1`),
    syncPoints: await q(`SELECT count(*) AS n FROM sync_point WHERE stack_id = $1`),
  }
}

test('an update stuck in a 10-minute action, superseded with preempt: the stack converges, nothing leaks', async () => {
  const { stack } = await c.services.create(c.actor, { name: 'stuck', template: template({ slow: tr('v1', 0), other: tr('x', 0) }) })
  expect(await c.settle(stack.id)).toBe('CREATE_COMPLETE')
  const before = await c.rows(stack.id)

  const first = await c.services.update(c.actor, stack.id, { template: template({ slow: tr('v2', 600), other: tr('x', 0) }) })
  await stuck(stack.id, ['slow'])
  const fix = await c.services.update(c.actor, stack.id, { template: template({ slow: tr('v3', 0), other: tr('x', 0) }), preempt: true })
  expect(fix.superseded).toBe(first.traversalId)
  expect(await c.settle(stack.id)).toBe('UPDATE_COMPLETE')

  const rows = await c.rows(stack.id)
  expect(Object.fromEntries(rows.map((r) => [r.name, `${r.action}_${r.status} ${(r.properties as { value: string }).value}`]))).toEqual({ other: 'CREATE_COMPLETE x', slow: 'CREATE_COMPLETE v3' })
  expect(rows).toHaveLength(2)
  // `other`'s target did not change: its row was never touched. `slow`'s aborted row was replaced (a
  // failed state-only row is replaced, as in Heat) and its cleanup deleted it.
  expect(rows.find((r) => r.name === 'other')!.id).toBe(before.find((r) => r.name === 'other')!.id)
  const aborted = await c.db.pool.query(
    `SELECT reason FROM event WHERE stack_id = $1 AND traversal_id = $2 AND kind = 'resource' AND resource_name = 'slow' AND status = 'FAILED'`,
    [stack.id, first.traversalId],
  )
  expect(aborted.rows.map((r) => r.reason)).toEqual([`UPDATE aborted (preempted by update ${fix.traversalId})`])
  expect(await leftovers(stack.id)).toEqual({ locked: 0, jobs: 0, syncPoints: 0 })
  const traversals = await c.db.pool.query(`SELECT id, outcome FROM traversal WHERE stack_id = $1 ORDER BY started_at`, [stack.id])
  expect(traversals.rows.map((t) => t.outcome)).toEqual(['COMPLETE', 'SUPERSEDED', 'COMPLETE'])
})

test('only the rows whose targets changed are aborted; without preempt, an update waits for a stuck action', async () => {
  const { stack } = await c.services.create(c.actor, { name: 'partly', template: template({ a: tr('a1', 0), b: tr('b1', 0) }) })
  expect(await c.settle(stack.id)).toBe('CREATE_COMPLETE')
  await c.services.update(c.actor, stack.id, { template: template({ a: tr('a2', 600), b: tr('b2', 600) }) })
  await stuck(stack.id, ['a', 'b'])

  // Without preempt: the new traversal's node for `a` is blocked by the action still running.
  const waiting = await c.services.update(c.actor, stack.id, { template: template({ a: tr('a3', 0), b: tr('b2', 600) }) })
  await c.waitFor(async () => {
    const { rows } = await c.db.pool.query(`SELECT 1 FROM event WHERE stack_id = $1 AND traversal_id = $2 AND resource_name = 'a' AND data->>'state' = 'BLOCKED'`, [stack.id, waiting.traversalId])
    return rows.length > 0
  }, 30_000, 'a to be blocked')
  expect((await c.rows(stack.id)).filter((r) => r.engine_id).map((r) => r.name).sort()).toEqual(['a', 'b'])

  // With preempt, changing `a` only: `a`'s action is aborted and converged, `b`'s goes on.
  const fix = await c.services.update(c.actor, stack.id, { template: template({ a: tr('a4', 0), b: tr('b2', 600) }), preempt: true })
  await c.waitFor(async () => (await c.rows(stack.id)).some((r) => r.name === 'a' && r.action === 'CREATE' && r.status === 'COMPLETE' && (r.properties as { value: string }).value === 'a4'), 30_000, 'a to converge')
  const rows = await c.rows(stack.id)
  expect(rows.filter((r) => r.name === 'b' && r.engine_id).map((r) => `${r.action}_${r.status}`)).toEqual(['UPDATE_IN_PROGRESS'])
  expect((await c.stack(stack.id)).currentTraversalId).toBe(fix.traversalId)

  // A delete stops the rest.
  await c.services.delete(c.actor, stack.id)
  expect(await c.settle(stack.id)).toBe('DELETE_COMPLETE')
  expect(await leftovers(stack.id)).toEqual({ locked: 0, jobs: 0, syncPoints: 0 })
})
