/**
 * Node steps share the stack row, so none of them changes the stack's status:
 * the step that ends a traversal (its last root, or a failure) names it in
 * `settle`, and kiln_settle decides after that step committed. A worker that
 * dies in between must not leave the stack IN_PROGRESS: the sweeper settles it.
 * The nodes are stepped here with the raw SQL calls, so nothing settles but
 * what the test calls.
 */
import crypto from 'node:crypto'
import { expect, test } from 'vitest'
import { claimJobs } from '../../lib/db/queries/queue'
import { loadTraversal } from '../../lib/db/queries/traversal'
import { registerWorker, sweep } from '../../lib/db/queries/workers'
import { indexGraph } from '../../lib/engine/graph'
import { parseNodeId, nodeId } from '../../lib/engine/types'
import type { TestCluster } from '../helpers/cluster'
import { workerlessCluster } from '../helpers/workerless'

let c: TestCluster
workerlessCluster((_db, cl) => (c = cl))

const LEASE_MS = 60_000

/** Run every node of the traversal through kiln_claim/begin/finish; returns what the finishes asked to settle. */
async function stepAll(traversalId: string, worker: string, fail: string | null): Promise<string[]> {
  const pool = c.db.pool
  const index = indexGraph((await loadTraversal(pool, traversalId))!.graph)
  const settle: string[] = []
  for (;;) {
    const [job] = await claimJobs(pool, worker, 1)
    if (!job) return settle
    const begun = (await pool.query('SELECT kiln_begin_node($1, $2, $3) AS out', [job.id, worker, LEASE_MS])).rows[0].out
    if (begun.settle) settle.push(begun.settle)
    if (begun.outcome !== 'locked') continue
    const id = nodeId({ rid: job.graphKeyId ?? job.resourceId!, update: job.isUpdate! })
    const ok = begun.resource.name !== fail
    const body = {
      ok,
      reason: ok ? 'done' : 'told to fail',
      set: job.isUpdate ? { action: 'CREATE', status: ok ? 'COMPLETE' : 'FAILED', current_template_id: begun.traversal.raw_template_id } : {},
      successors: (index.requiredBy.get(id) ?? []).map(parseNodeId).map((k) => [k.rid, k.update]),
      is_root: index.roots.has(id),
      claim: false,
    }
    const out = (await pool.query('SELECT kiln_finish_node($1, $2, $3) AS out', [job.id, worker, JSON.stringify(body)])).rows[0].out
    expect(out.outcome).toBe('ok')
    if (out.settle) settle.push(out.settle)
  }
}

const status = async (id: string) => {
  const { rows } = await c.db.pool.query('SELECT action, status FROM stack WHERE id = $1', [id])
  return `${rows[0].action}_${rows[0].status}`
}

test('the last root asks to settle; until someone does the stack stays IN_PROGRESS; the sweeper settles it COMPLETE', async () => {
  const worker = crypto.randomUUID()
  await registerWorker(c.db.pool, worker, 1, 'test')
  const res = await c.services.create(c.actor, {
    name: 'settle-complete',
    template: 'heat_template_version: 2018-08-31\nresources:\n  a: {type: OS::Heat::None}\n  b: {type: OS::Heat::None, depends_on: [a]}\n',
  })
  const settle = await stepAll(res.traversalId!, worker, null)
  expect(settle).toEqual([res.traversalId])
  expect(await status(res.stack.id)).toBe('CREATE_IN_PROGRESS')
  await sweep(c.db.pool, LEASE_MS)
  expect(await status(res.stack.id)).toBe('CREATE_COMPLETE')
  // Settling again changes nothing.
  expect((await c.db.pool.query('SELECT kiln_settle($1, $2) AS out', [res.stack.id, res.traversalId])).rows[0].out).toBe('COMPLETE')
})

test('a failure asks to settle; kiln_settle fails the stack once nothing is in flight', async () => {
  const worker = crypto.randomUUID()
  await registerWorker(c.db.pool, worker, 1, 'test')
  const res = await c.services.create(c.actor, {
    name: 'settle-failed',
    disableRollback: true,
    template: 'heat_template_version: 2018-08-31\nresources:\n  a: {type: OS::Heat::None}\n  b: {type: OS::Heat::None, depends_on: [a]}\n',
  })
  const settle = await stepAll(res.traversalId!, worker, 'a')
  expect(settle[0]).toBe(res.traversalId)
  expect(await status(res.stack.id)).toBe('CREATE_IN_PROGRESS')
  expect((await c.db.pool.query('SELECT kiln_settle($1, $2) AS out', [res.stack.id, res.traversalId])).rows[0].out).toBe('FAILED')
  expect(await status(res.stack.id)).toBe('CREATE_FAILED')
})
