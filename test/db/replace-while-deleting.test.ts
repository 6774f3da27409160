/**
 * A resource put back while an older traversal is deleting it: the new
 * traversal's node waits for the delete's lock, as it waits for any other, and
 * then creates the resource again. A Kiln::File's replacement takes over its
 * path, which it cannot do while the delete holds it (the delete could remove
 * the successor's file); a replacement created beside the running delete
 * failed with "being deleted by an older version of this resource".
 *
 * The engine code runs in this process against the real store, so that the
 * delete can be held (claimed, not yet run) and its worker's death placed
 * exactly; the sweeper that breaks a dead worker's lock is the real one.
 */
import fs from 'node:fs'
import path from 'node:path'
import { expect, test } from 'vitest'
import { sweep } from '../../lib/db/queries/workers'
import { runNode } from '../../lib/engine/check-resource'
import type { TestCluster } from '../helpers/cluster'
import { IN_PROCESS_LEASE_MS, inProcessWorker as inProcess } from '../helpers/in-process-worker'
import { workerlessCluster } from '../helpers/workerless'

let c: TestCluster
workerlessCluster((_d, cl) => (c = cl))

const hot = (resources: Record<string, unknown>) => JSON.stringify({ heat_template_version: '2018-08-31', resources })
const file = (p: string, content: string) => ({ f: { type: 'Kiln::File', properties: { path: p, content } } })
const read = (rel: string) => fs.readFileSync(path.join(c.projectWorkspace(), rel), 'utf8')

/** Run every queued node and whatever they make ready, in this process, until the queue is empty. */
async function drain(): Promise<void> {
  const w = await inProcess(c, { inline: true })
  for (let jobs = await w.claimQueued(4); jobs.length; jobs = await w.claimQueued(4)) {
    for (let queue = jobs; queue.length; ) {
      const results = await Promise.all(queue.map((j) => runNode(w.deps, j)))
      queue = results.flatMap((r) => r.next)
    }
  }
}

/** A stack whose file f is made, then an update without f whose delete is claimed and held. */
async function deleteHeld(name: string, rel: string) {
  const w = await inProcess(c)
  const stack = (await c.services.create(c.actor, { name, template: hot(file(rel, 'one')) })).stack.id
  expect((await runNode(w.deps, await w.claim())).outcome).toBe('created')
  expect(await c.settle(stack)).toBe('CREATE_COMPLETE')
  await c.services.update(c.actor, stack, { template: hot({}) })
  const held = await w.claim()
  expect(held.begun?.outcome).toBe('locked')
  // f comes back while its delete is held: the new traversal's node waits for the lock.
  await c.services.update(c.actor, stack, { template: hot(file(rel, 'two')) })
  const other = await inProcess(c)
  expect((await other.claim()).begun).toMatchObject({ outcome: 'blocked' })
  return { w, stack, held }
}

test('a resource put back while an older traversal deletes it waits for the delete, then is made again', { timeout: 60_000 }, async () => {
  const { w, stack, held } = await deleteHeld('back-again', 'again/f.txt')
  // The delete runs (removing the file) and retriggers the waiting node.
  expect((await runNode(w.deps, held)).outcome).toBe('deleted')
  expect(fs.existsSync(path.join(c.projectWorkspace(), 'again/f.txt'))).toBe(false)
  await drain()
  expect(await c.settle(stack)).toBe('UPDATE_COMPLETE')
  expect(read('again/f.txt')).toBe('two')
  const live = (await c.db.pool.query(`SELECT name FROM resource WHERE stack_id = $1 AND NOT (action = 'DELETE' AND status = 'COMPLETE')`, [stack])).rows
  expect(live).toEqual([{ name: 'f' }])
})

test('a resource put back while a worker that died deletes it is made again once the lock is broken', { timeout: 60_000 }, async () => {
  const { w, stack } = await deleteHeld('back-after-death', 'dead/f.txt')
  // The deleting worker dies before touching the file: the sweeper breaks its lock and retriggers the waiter.
  await c.db.pool.query(`UPDATE resource SET lease_expires_at = now() - interval '1 second' WHERE engine_id = $1`, [w.id])
  await c.db.pool.query(`UPDATE worker SET stopped_at = now() WHERE id = $1`, [w.id])
  expect((await sweep(c.db.pool, IN_PROCESS_LEASE_MS)).broken).toBe(1)
  await drain()
  expect(await c.settle(stack)).toBe('UPDATE_COMPLETE')
  expect(read('dead/f.txt')).toBe('two')
  expect(c.workspaceFiles()).toContain('dead/f.txt')
})
