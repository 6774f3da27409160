/**
 * What a worker that dies holding a lock leaves behind, with the real engine
 * code run in this process against the real store (so the death can be placed
 * exactly), the real sweeper breaking the lock, and a real worker process for
 * what follows.
 *
 * - A create that changed the outside world and died before storing its
 *   result: the create of a type that is not state-only writes the properties
 *   it is about to use first (kiln_record_intent), and the row's cleanup
 *   deletes by them. Without it the row holds no properties and no physical
 *   id, and the file is leaked.
 * - A node holding a row that was already deleted (a cleanup with nothing
 *   left to do): breaking its lock leaves the row deleted. Marked
 *   DELETE_FAILED it would be a live resource again, which no node of a
 *   traversal planned while it was gone would ever clean up.
 */
import fs from 'node:fs'
import path from 'node:path'
import { expect, test } from 'vitest'
import { sweep } from '../../lib/db/queries/workers'
import { runNode } from '../../lib/engine/check-resource'
import type { ConvergenceStore } from '../../lib/engine/ports'
import type { TestCluster } from '../helpers/cluster'
import { IN_PROCESS_LEASE_MS, inProcessWorker as inProcess } from '../helpers/in-process-worker'
import { workerlessCluster } from '../helpers/workerless'

let c: TestCluster
workerlessCluster((_d, cl) => (c = cl))

const hot = (resources: Record<string, unknown>) => JSON.stringify({ heat_template_version: '2018-08-31', resources })
const file = (p: string, content: string) => ({ type: 'Kiln::File', properties: { path: p, content } })

/** A worker of this process (the store's calls may be overridden). */
const inProcessWorker = (override: Partial<ConvergenceStore> = {}) => inProcess(c, { store: () => override })

/** The worker stops heartbeating: its leases run out, and the sweeper breaks its locks. */
async function dies(worker: string): Promise<number> {
  await c.db.pool.query(`UPDATE resource SET lease_expires_at = now() - interval '1 second' WHERE engine_id = $1`, [worker])
  await c.db.pool.query(`UPDATE worker SET stopped_at = now() WHERE id = $1`, [worker])
  return (await sweep(c.db.pool, IN_PROCESS_LEASE_MS)).broken
}

const rowsOf = async (stackId: string) =>
  (await c.db.pool.query(`SELECT id, name, action, status, properties, pending_properties, physical_id, engine_id FROM resource WHERE stack_id = $1 ORDER BY id`, [stackId])).rows

test('breaking the lock of a dead worker on a row already deleted leaves it deleted', { timeout: 60_000 }, async () => {
  const w = await inProcessWorker()
  const stack = (await c.services.create(c.actor, { name: 'deleted-row', template: hot({ f: file('deleted/f.txt', 'one') }) })).stack.id
  expect((await runNode(w.deps, await w.claim())).outcome).toBe('created')
  expect(await c.settle(stack)).toBe('CREATE_COMPLETE')

  // U1: f leaves the template; its cleanup is begun (DELETE_IN_PROGRESS) and held.
  await c.services.update(c.actor, stack, { template: hot({}) })
  const u1 = await w.claim()
  // U2, planned while f is DELETE_IN_PROGRESS: its cleanup of f waits for U1's lock.
  await c.services.update(c.actor, stack, { template: hot({}) })
  const blocked = await inProcessWorker()
  expect((await blocked.claim()).begun?.outcome).toBe('blocked')
  // U1 deletes the file and retriggers U2's node, which a worker takes (nothing left to do) and dies holding.
  expect((await runNode(w.deps, u1)).outcome).toBe('deleted')
  const doomed = await inProcessWorker()
  expect((await doomed.claim()).begun?.outcome).toBe('locked')
  expect(await rowsOf(stack)).toMatchObject([{ action: 'DELETE', status: 'COMPLETE', engine_id: doomed.id }])

  // U3 is planned while the row is gone: it has no node for it.
  await c.services.update(c.actor, stack, { template: hot({ n: { type: 'OS::Heat::None' } }) })
  expect(await dies(doomed.id)).toBe(1)
  expect((await rowsOf(stack))[0]).toMatchObject({ name: 'f', action: 'DELETE', status: 'COMPLETE', engine_id: null })
  expect((await runNode(w.deps, await w.claim())).outcome).toBe('created')
  expect(await c.settle(stack)).toBe('UPDATE_COMPLETE')
  expect((await rowsOf(stack)).filter((r) => !(r.action === 'DELETE' && r.status === 'COMPLETE')).map((r) => r.name)).toEqual(['n'])
  expect(c.workspaceFiles()).toEqual([])
})

test('a create whose worker died before storing its result is still deleted by its cleanup', { timeout: 90_000 }, async () => {
  await c.db.pool.query('DELETE FROM job WHERE locked_by IS NULL') // whatever an earlier test left
  const stack = (await c.services.create(c.actor, { name: 'intent', template: hot({ f: file('intent/f.txt', 'one') }) })).stack.id
  // The worker "dies" when it tries to store the result: the file is written, the row is not told.
  const w = await inProcessWorker({ finishNode: () => Promise.reject(new Error('SIGKILL')) })
  await expect(runNode(w.deps, await w.claim())).rejects.toThrow('SIGKILL')
  expect(fs.readFileSync(path.join(c.projectWorkspace(), 'intent/f.txt'), 'utf8')).toBe('one')
  const [row] = await rowsOf(stack)
  expect(row).toMatchObject({ action: 'CREATE', status: 'IN_PROGRESS', properties: null, physical_id: null, engine_id: w.id })
  expect(row.pending_properties).toMatchObject({ path: 'intent/f.txt', content: 'one' })

  // Its lease runs out; the sweeper breaks the lock and fails the row.
  expect(await dies(w.id)).toBe(1)
  expect(await rowsOf(stack)).toMatchObject([{ action: 'CREATE', status: 'FAILED', engine_id: null }])

  // The resource leaves the template (before any worker could re-run the create):
  // the cleanup, in a real worker process, deletes the file.
  await c.services.update(c.actor, stack, { template: hot({ n: { type: 'OS::Heat::None' } }) })
  c.spawnWorker()
  expect(await c.settle(stack)).toBe('UPDATE_COMPLETE')
  expect(fs.existsSync(path.join(c.projectWorkspace(), 'intent/f.txt'))).toBe(false)
  expect(c.workspaceFiles()).toEqual([])
})
