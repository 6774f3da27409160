/**
 * A finish that makes several successors ready hands the worker as many as it
 * has room for (claimMax), each begun in the same transaction when its row is
 * free: a fan-out costs no queue hop. The rest are queued for any worker; one
 * claimed successor whose row is busy comes back claimed but not begun.
 * Finishes that are ready together share one transaction (kiln_finish_nodes,
 * lib/db/step-batcher.ts), and the worker's free slots are one budget for them.
 */
import crypto from 'node:crypto'
import pg from 'pg'
import { expect, test } from 'vitest'
import { finishNode, finishNodes } from '../../lib/db/queries/node'
import { claimAndBeginJobs } from '../../lib/db/queries/queue'
import { registerWorker } from '../../lib/db/queries/workers'
import { createStore } from '../../lib/db/store'
import type { ClaimedJob, FinishRequest } from '../../lib/engine/ports'
import type { TestCluster } from '../helpers/cluster'
import type { TestDatabase } from '../helpers/db'
import { workerlessCluster } from '../helpers/workerless'

let db: TestDatabase
let c: TestCluster
workerlessCluster((d, cl) => ((db = d), (c = cl)))

const LEASE_MS = 60_000
// b, c and d each need a: finishing a makes all three ready.
const TEMPLATE = `heat_template_version: 2018-08-31
resources:
  a: {type: OS::Heat::None}
  b: {type: OS::Heat::None, depends_on: a}
  c: {type: OS::Heat::None, depends_on: a}
  d: {type: OS::Heat::None, depends_on: a}
`

async function startFanOut(name: string) {
  // Queued jobs of an earlier test's stack must not be the one this claim takes.
  await c.db.pool.query('DELETE FROM job WHERE locked_by IS NULL')
  const worker = crypto.randomUUID()
  await registerWorker(c.db.pool, worker, 8, 'test')
  const res = await c.services.create(c.actor, { name, template: TEMPLATE })
  const { rows } = await c.db.pool.query(`SELECT id, name FROM resource WHERE stack_id = $1`, [res.stack.id])
  const id = Object.fromEntries(rows.map((r: { id: number; name: string }) => [r.name, r.id])) as Record<'a' | 'b' | 'c' | 'd', number>
  const [a] = await claimAndBeginJobs(c.db.pool, worker, 10, LEASE_MS)
  expect(a?.resourceId).toBe(id.a)
  expect(a?.begun?.outcome).toBe('locked')
  const state = async (rid: number) =>
    (await c.db.pool.query(`SELECT state FROM sync_point WHERE traversal_id = $1 AND resource_id = $2 AND is_update`, [res.traversalId, rid])).rows[0].state as string
  const queued = async () =>
    (await c.db.pool.query(`SELECT resource_id FROM job WHERE stack_id = $1 AND locked_by IS NULL ORDER BY resource_id`, [res.stack.id])).rows.map((r) => Number(r.resource_id))
  const finishA = (claimMax: number) =>
    finishNode(c.db.pool, worker, a!, {
      ok: true,
      reason: 'state changed',
      set: { action: 'CREATE', status: 'COMPLETE', statusReason: 'state changed' },
      successors: [id.b, id.c, id.d].map((rid) => ({ rid, update: true })),
      isRoot: false,
      claim: true,
      claimMax,
    }, LEASE_MS)
  return { worker, id, state, queued, finishA }
}

const rowsOf = (claimed: ClaimedJob[]) => claimed.map((j) => j.resourceId).sort((x, y) => x! - y!)

test('a finish claims and begins every successor it makes ready, up to claimMax; the rest are queued', async () => {
  const t = await startFanOut('fan-out-two')
  const res = await t.finishA(2)
  if (res.outcome !== 'ok') throw new Error(res.outcome)
  expect(res.claimed).toHaveLength(2)
  for (const j of res.claimed) {
    expect(j.begun?.outcome).toBe('locked')
    expect(await t.state(j.resourceId!)).toBe('RUNNING')
  }
  const taken = rowsOf(res.claimed)
  const left = [t.id.b, t.id.c, t.id.d].filter((r) => !taken.includes(r))
  expect(left).toHaveLength(1)
  expect(await t.state(left[0]!)).toBe('READY')
  expect(await t.queued()).toEqual(left)
})

test('with room for all, nothing is queued; a busy row comes back claimed but not begun', async () => {
  const t = await startFanOut('fan-out-busy')
  const other = new pg.Client({ connectionString: db.url })
  await other.connect()
  try {
    await other.query('BEGIN')
    await other.query('SELECT 1 FROM resource WHERE id = $1 FOR UPDATE', [t.id.c])
    const res = await t.finishA(8)
    if (res.outcome !== 'ok') throw new Error(res.outcome)
    expect(rowsOf(res.claimed)).toEqual([t.id.b, t.id.c, t.id.d].sort((x, y) => x - y))
    const byRow = new Map(res.claimed.map((j) => [j.resourceId, j]))
    expect(byRow.get(t.id.b)?.begun?.outcome).toBe('locked')
    expect(byRow.get(t.id.d)?.begun?.outcome).toBe('locked')
    expect(byRow.get(t.id.c)?.begun).toBeUndefined()
    expect(await t.state(t.id.c)).toBe('READY')
    expect(await t.queued()).toEqual([])
  } finally {
    await other.query('ROLLBACK').catch(() => {})
    await other.end()
  }
})

/** A pool that records the name of every engine call it sends (the calls themselves are real). */
function spiedPool(): { pool: pg.Pool; calls: string[] } {
  const pool = new pg.Pool({ connectionString: db.url, max: 4 })
  const calls: string[] = []
  const query = pool.query.bind(pool) as (...a: unknown[]) => Promise<unknown>
  ;(pool as unknown as { query: (...a: unknown[]) => Promise<unknown> }).query = (...a: unknown[]) => {
    const name = (a[0] as { name?: string }).name
    if (name) calls.push(name)
    return query(...a)
  }
  return { pool, calls }
}

/** A fresh stack of `template` whose ready nodes a new worker has claimed and begun. */
async function claimedStack(name: string, template: string) {
  // Queued jobs of an earlier test's stack must not be the ones this claim takes.
  await c.db.pool.query('DELETE FROM job WHERE locked_by IS NULL')
  const worker = crypto.randomUUID()
  await registerWorker(c.db.pool, worker, 16, 'test')
  const res = await c.services.create(c.actor, { name, template })
  const { rows } = await c.db.pool.query(`SELECT id, name FROM resource WHERE stack_id = $1`, [res.stack.id])
  // Tests name their resources a, b, c, d.
  const id = Object.fromEntries(rows.map((r: { id: number; name: string }) => [r.name, r.id])) as Record<'a' | 'b' | 'c' | 'd', number>
  const jobs = await claimAndBeginJobs(c.db.pool, worker, 20, LEASE_MS)
  return { worker, res, id, jobs }
}

test('finishes ready at the same moment share one transaction: both inputs reported, the shared successor begun once', async () => {
  const { worker, res, id, jobs } = await claimedStack('fan-in-batch', `heat_template_version: 2018-08-31
resources:
  a: {type: OS::Heat::None}
  b: {type: OS::Heat::None}
  c: {type: OS::Heat::None, depends_on: [a, b]}
`)
  expect(rowsOf(jobs)).toEqual([id.a, id.b].sort((x, y) => x - y))
  const { rows: before } = await c.db.pool.query(`SELECT kiln_last_seq($1)::int AS n`, [res.stack.id])
  const results = await finishNodes(c.db.pool, worker, jobs.map((job) => ({
    job,
    req: { ok: true, reason: 'state changed', set: { action: 'CREATE' as const, status: 'COMPLETE' as const }, resourceEvent: true, successors: [{ rid: id.c, update: true }], isRoot: false, claim: true, claimMax: 4 },
  })), LEASE_MS)
  expect(results.map((r) => r.outcome)).toEqual(['ok', 'ok'])
  const claimed = results.flatMap((r) => (r.outcome === 'ok' ? r.claimed : []))
  expect(rowsOf(claimed)).toEqual([id.c])
  expect(claimed[0]!.begun?.outcome).toBe('locked')
  const { rows: sp } = await c.db.pool.query(`SELECT satisfied, state FROM sync_point WHERE traversal_id = $1 AND resource_id = $2 AND is_update`, [res.traversalId, id.c])
  expect(sp[0]).toMatchObject({ satisfied: 2, state: 'RUNNING' })
  // One transaction's events: numbered on from where the stack was, without gaps.
  const { rows: ev } = await c.db.pool.query(`SELECT seq::int AS seq, resource_name, status FROM event WHERE stack_id = $1 AND seq > $2 ORDER BY seq`, [res.stack.id, before[0].n])
  expect(ev.map((e) => e.seq)).toEqual(ev.map((_, i) => before[0].n + 1 + i))
  expect(ev.filter((e) => e.status === 'COMPLETE').map((e) => e.resource_name).sort()).toEqual(['a', 'b'])
  expect(ev.filter((e) => e.status === 'IN_PROGRESS').map((e) => e.resource_name)).toEqual(['c'])
})

test("a batch's finishes share the worker's free slots: claimMax is one budget, not one per finish", async () => {
  const { worker, res, id, jobs } = await claimedStack('batch-budget', `heat_template_version: 2018-08-31
resources:
  a: {type: OS::Heat::None}
  b: {type: OS::Heat::None}
  c: {type: OS::Heat::None, depends_on: a}
  d: {type: OS::Heat::None, depends_on: b}
`)
  const next = new Map([[id.a, id.c], [id.b, id.d]])
  const results = await finishNodes(c.db.pool, worker, jobs.map((job) => ({
    job,
    req: { ok: true, successors: [{ rid: next.get(job.resourceId!)!, update: true }], isRoot: false, claim: true, claimMax: 1 },
  })), LEASE_MS)
  const claimed = results.flatMap((r) => (r.outcome === 'ok' ? r.claimed : []))
  expect(claimed).toHaveLength(1)
  const { rows: queued } = await c.db.pool.query(`SELECT resource_id FROM job WHERE stack_id = $1 AND locked_by IS NULL`, [res.stack.id])
  expect(queued.map((q) => Number(q.resource_id))).toEqual([id.c, id.d].filter((r) => r !== claimed[0]!.resourceId))
})

test("a batch counts the traversal's roots down once, and the batch that reaches zero settles the stack", async () => {
  const { worker, res, jobs } = await claimedStack('batch-roots', `heat_template_version: 2018-08-31
resources:
  a: {type: OS::Heat::None}
  b: {type: OS::Heat::None}
  c: {type: OS::Heat::None}
`)
  expect(jobs).toHaveLength(3)
  const root: FinishRequest = { ok: true, successors: [], isRoot: true, claim: false }
  const status = async () =>
    (await c.db.pool.query(`SELECT s.status, t.roots_pending FROM stack s JOIN traversal t ON t.id = s.current_traversal_id WHERE s.id = $1`, [res.stack.id])).rows[0]
  const first = await finishNodes(c.db.pool, worker, jobs.slice(0, 2).map((job) => ({ job, req: root })), LEASE_MS)
  expect(first.map((r) => r.outcome)).toEqual(['ok', 'ok'])
  expect(await status()).toEqual({ status: 'IN_PROGRESS', roots_pending: 1 })
  const last = await finishNodes(c.db.pool, worker, jobs.slice(2).map((job) => ({ job, req: root })), LEASE_MS)
  expect(last.map((r) => r.outcome)).toEqual(['ok'])
  expect(await status()).toEqual({ status: 'COMPLETE', roots_pending: 0 })
})

test('a worker sends the finishes that are ready together as one call once two are in flight', async () => {
  const names = Array.from({ length: 12 }, (_, i) => `w${i}`)
  const template = JSON.stringify({ heat_template_version: '2018-08-31', resources: Object.fromEntries(names.map((n) => [n, { type: 'OS::Heat::None' }])) })
  const { worker, res, jobs } = await claimedStack('gathered', template)
  expect(jobs).toHaveLength(12)

  const { pool, calls } = spiedPool()
  try {
    const store = createStore(pool, { workerId: worker, leaseMs: LEASE_MS })
    const results = await Promise.all(jobs.map((job) => store.finishNode(job, { ok: true, successors: [], isRoot: true, claim: false })))
    expect(results.map((r) => r.outcome)).toEqual(jobs.map(() => 'ok'))
    expect(calls).toEqual(['kiln_finish_node', 'kiln_finish_node', 'kiln_finish_nodes'])
    // The last root's finish settled the stack.
    const { rows: st } = await c.db.pool.query(`SELECT action, status FROM stack WHERE id = $1`, [res.stack.id])
    expect(st[0]).toEqual({ action: 'CREATE', status: 'COMPLETE' })
  } finally {
    await pool.end()
  }
})

test('replace calls that are ready together go as one call once two are in flight, each as it would alone', async () => {
  const names = Array.from({ length: 12 }, (_, i) => `p${i}`)
  const template = JSON.stringify({ heat_template_version: '2018-08-31', resources: Object.fromEntries(names.map((n) => [n, { type: 'OS::Heat::None' }])) })
  const { worker, res, jobs } = await claimedStack('replaced-together', template)
  const created = await finishNodes(c.db.pool, worker, jobs.map((job) => ({ job, req: { ok: true, successors: [], isRoot: true, claim: false } })), LEASE_MS)
  expect(created.map((r) => r.outcome)).toEqual(jobs.map(() => 'ok'))
  await c.db.pool.query('DELETE FROM job WHERE locked_by IS NULL')
  const updated = await c.services.update(c.actor, 'replaced-together', { template })
  const updates = (await claimAndBeginJobs(c.db.pool, worker, 20, LEASE_MS)).filter((j) => j.isUpdate)
  expect(updates).toHaveLength(12)
  const { rows: lastSeq } = await c.db.pool.query(`SELECT max(seq)::int AS n FROM event WHERE stack_id = $1`, [res.stack.id])

  const { pool, calls } = spiedPool()
  try {
    const store = createStore(pool, { workerId: worker, leaseMs: LEASE_MS })
    const results = await Promise.all(updates.map((job) => store.replaceNode(job, { type: 'OS::Heat::None', requires: [], reason: 'replace', claim: true })))
    expect(calls).toEqual(['kiln_replace_node', 'kiln_replace_node', 'kiln_replace_nodes'])
    for (const [i, r] of results.entries()) {
      if (r.outcome !== 'ok') throw new Error(`replace ${i}: ${r.outcome}`)
      const job = updates[i]!
      // The new row replaces the old one and is begun for this worker, impersonating its graph node.
      expect(r.replacement.replaces).toBe(job.resourceId)
      expect(r.claimed?.graphKeyId).toBe(job.resourceId)
      expect(r.claimed?.begun?.outcome).toBe('locked')
    }
    const { rows } = await c.db.pool.query(
      `SELECT o.name, o.engine_id AS old_holder, o.replaced_by, n.id AS new_id, n.engine_id AS new_holder, n.lock_traversal_id
         FROM resource o JOIN resource n ON n.replaces = o.id WHERE o.stack_id = $1 ORDER BY o.name`, [res.stack.id])
    expect(rows).toHaveLength(12)
    for (const row of rows) {
      expect(row.old_holder).toBeNull()
      expect(row.replaced_by).toBe(row.new_id)
      expect(row.new_holder).toBe(worker)
      expect(row.lock_traversal_id).toBe(updated.traversalId)
    }
    // Every call's events, numbered on from the last one without a gap.
    const { rows: evs } = await c.db.pool.query(`SELECT seq::int AS seq, reason FROM event WHERE stack_id = $1 AND seq > $2 ORDER BY seq`, [res.stack.id, lastSeq[0].n])
    expect(evs.map((e) => e.seq)).toEqual(evs.map((_, i) => lastSeq[0].n + 1 + i))
    expect(evs.filter((e) => String(e.reason).startsWith('replaced:'))).toHaveLength(12)
    const { rows: sp } = await c.db.pool.query(`SELECT count(*)::int AS n FROM sync_point WHERE traversal_id = $1 AND is_update AND state = 'RUNNING'`, [updated.traversalId])
    expect(sp[0].n).toBe(12)
  } finally {
    await pool.end()
  }
})
