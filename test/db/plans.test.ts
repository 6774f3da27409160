/**
 * Node steps find their rows by key, whatever the statistics said when their
 * plans were cached. PL/pgSQL keeps one plan per statement per connection; made
 * while sync_input was empty, a plan stayed a sequential scan as a traversal
 * filled the table (O(N) per node: 50 million rows read for a 10,000-node
 * chain). Every entry point therefore runs with enable_seqscan = off and
 * generic plans (no re-planning per call).
 */
import crypto from 'node:crypto'
import pg from 'pg'
import { expect, test } from 'vitest'
import { finishNode } from '../../lib/db/queries/node'
import { claimAndBeginJobs } from '../../lib/db/queries/queue'
import { loadTraversal } from '../../lib/db/queries/traversal'
import { registerWorker } from '../../lib/db/queries/workers'
import { indexGraph } from '../../lib/engine/graph'
import type { ClaimedJob } from '../../lib/engine/ports'
import { nodeId, parseNodeId } from '../../lib/engine/types'
import type { TestCluster } from '../helpers/cluster'
import type { TestDatabase } from '../helpers/db'
import { workerlessCluster } from '../helpers/workerless'

let db: TestDatabase
let c: TestCluster
workerlessCluster((d, cl) => ((db = d), (c = cl)))

const ENTRY_POINTS = ['kiln_begin_node', 'kiln_claim_jobs', 'kiln_finish_node', 'kiln_finish_nodes', 'kiln_replace_node', 'kiln_mark_in_progress', 'kiln_node_progress', 'kiln_settle', 'kiln_heartbeat']

test('every node-step entry point runs with index lookups and generic plans', async () => {
  const { rows } = await c.db.pool.query(`SELECT proname, proconfig FROM pg_proc WHERE proname = ANY($1)`, [ENTRY_POINTS])
  expect(rows.map((r) => r.proname).sort()).toEqual([...ENTRY_POINTS].sort())
  for (const r of rows) expect(r.proconfig, r.proname).toEqual(expect.arrayContaining(['enable_seqscan=off', 'plan_cache_mode=force_generic_plan']))
})

test('a chain run after statistics said the sync tables were empty scans none of them sequentially', async () => {
  const N = 120
  const names = Array.from({ length: N }, (_, i) => `r${i}`)
  const template = JSON.stringify({
    heat_template_version: '2018-08-31',
    resources: Object.fromEntries(names.map((n, i) => [n, i ? { type: 'OS::Heat::None', depends_on: [`r${i - 1}`] } : { type: 'OS::Heat::None' }])),
  })
  await c.db.pool.query('VACUUM ANALYZE sync_input, sync_point, job')
  const worker = crypto.randomUUID()
  await registerWorker(c.db.pool, worker, 4, 'test')
  const res = await c.services.create(c.actor, { name: 'plans', template })
  const { rows } = await c.db.pool.query(`SELECT id, name FROM resource WHERE stack_id = $1`, [res.stack.id])
  const idOf = new Map(rows.map((r: { id: number; name: string }) => [r.name, r.id]))
  const nameOf = new Map(rows.map((r: { id: number; name: string }) => [r.id, r.name]))

  // One connection runs every step, so its statistics are the whole story.
  const steps = new pg.Pool({ connectionString: db.url, max: 1 })
  const seqScans = async () => {
    await steps.query('SELECT pg_stat_force_next_flush()')
    await steps.query('SELECT 1') // goes idle: the counters are flushed
    const { rows: t } = await steps.query(`SELECT relname, seq_scan FROM pg_stat_user_tables WHERE relname IN ('sync_input', 'sync_point')`)
    return Object.fromEntries(t.map((r) => [r.relname, Number(r.seq_scan)]))
  }
  try {
    const before = await seqScans()
    let [job]: (ClaimedJob | undefined)[] = await claimAndBeginJobs(steps, worker, 1, 60_000)
    let done = 0
    while (job) {
      const i = Number(nameOf.get(job.resourceId!)!.slice(1))
      const out = await finishNode(steps, worker, job, {
        ok: true,
        set: { action: 'CREATE', status: 'COMPLETE', statusReason: 'state changed' },
        payload: null,
        successors: i + 1 < N ? [{ rid: idOf.get(`r${i + 1}`)!, update: true }] : [],
        isRoot: i + 1 === N,
        claim: true,
      }, 60_000)
      if (out.outcome !== 'ok') throw new Error(out.outcome)
      done++
      job = out.claimed[0]
    }
    expect(done).toBe(N)
    await new Promise((r) => setTimeout(r, 50))
    expect(await seqScans()).toEqual(before)
  } finally {
    await steps.end()
  }
})

/**
 * Run every node of a traversal on one connection as a worker would with
 * actions that change nothing (successors from the stored graph, claim and
 * begin inline), until none is left. Returns how many steps the worker ran.
 */
async function runByHand(steps: pg.Pool, worker: string, traversalId: string, action: 'CREATE' | 'UPDATE'): Promise<number> {
  const index = indexGraph((await loadTraversal(steps, traversalId))!.graph)
  let queue = await claimAndBeginJobs(steps, worker, 64, 60_000)
  let ran = 0
  while (queue.length) {
    const job = queue.shift()!
    const begun = job.begun
    if (begun?.outcome !== 'locked') throw new Error(`not begun: ${begun?.outcome}`)
    const key = { rid: job.graphKeyId ?? job.resourceId!, update: job.isUpdate! }
    const id = nodeId(key)
    const out = await finishNode(steps, worker, job, {
      ok: true,
      reason: key.update ? 'state changed' : 'unchanged',
      set: key.update ? { action, status: 'COMPLETE', statusReason: 'state changed', currentTemplateId: begun.traversal.rawTemplateId } : {},
      payload: null,
      successors: (index.requiredBy.get(id) ?? []).map(parseNodeId),
      isRoot: index.roots.has(id),
      claim: true,
      claimMax: 64,
    }, 60_000)
    if (out.outcome !== 'ok') throw new Error(out.outcome)
    ran++
    queue.push(...out.claimed)
    if (!queue.length) queue = await claimAndBeginJobs(steps, worker, 64, 60_000)
  }
  return ran
}

test('a create and an in-place update read each sync point by key: every step, and the no-op cleanup tail completed inline', async () => {
  // Statistics taken while sync_point was empty (the test above) once made the
  // cached generic plans of every step look sync points up through a second
  // index on (traversal_id, state) and read all of the traversal's (600 rows
  // per step of this create, 1,700 per step of its update). And after the last
  // update node, each no-op cleanup node completed inline (64 per step) joined
  // its successors to the traversal's whole set of sync points. Both O(N) per
  // node; by key it is a handful of rows.
  const N = 120
  const template = JSON.stringify({
    heat_template_version: '2018-08-31',
    resources: Object.fromEntries(Array.from({ length: N }, (_, i) => [`r${i}`, i ? { type: 'OS::Heat::None', depends_on: [`r${i - 1}`] } : { type: 'OS::Heat::None' }])),
  })
  const worker = crypto.randomUUID()
  await registerWorker(c.db.pool, worker, 64, 'test')
  const steps = new pg.Pool({ connectionString: db.url, max: 1 })
  const syncPointReads = async () => {
    await steps.query('SELECT pg_stat_force_next_flush()')
    await steps.query('SELECT 1')
    const { rows } = await steps.query(`SELECT coalesce(idx_tup_fetch, 0) + seq_tup_read AS n FROM pg_stat_user_tables WHERE relname = 'sync_point'`)
    return Number(rows[0].n)
  }
  try {
    const created = await c.services.create(c.actor, { name: 'cleanup-tail', template })
    const beforeCreate = await syncPointReads()
    expect(await runByHand(steps, worker, created.traversalId!, 'CREATE')).toBe(N)
    const createReads = (await syncPointReads()) - beforeCreate

    const updated = await c.services.update(c.actor, 'cleanup-tail', { template })
    const beforeUpdate = await syncPointReads()
    // The cleanup nodes past the first 64 of the tail are run by a worker (here: us).
    const ran = await runByHand(steps, worker, updated.traversalId!, 'UPDATE')
    const updateReads = (await syncPointReads()) - beforeUpdate
    const { rows } = await c.db.pool.query(`SELECT status, (SELECT count(*)::int FROM event WHERE traversal_id = $1 AND (data->>'inline')::boolean) AS inline FROM stack WHERE id = $2`, [updated.traversalId, updated.stack.id])
    expect(rows[0].status).toBe('COMPLETE')
    expect(rows[0].inline + ran).toBe(2 * N)
    expect(rows[0].inline).toBeGreaterThanOrEqual(64)
    // By key: about six rows per node (measured); O(N) per node is hundreds.
    expect(createReads).toBeLessThan(20 * N)
    expect(updateReads).toBeLessThan(20 * 2 * N)
  } finally {
    await steps.end()
  }
})
