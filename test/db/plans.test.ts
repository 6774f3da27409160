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
import { beforeAll, expect, test } from 'vitest'
import { finishNode, finishNodes, replaceNode } from '../../lib/db/queries/node'
import { claimAndBeginJobs } from '../../lib/db/queries/queue'
import { loadTraversal } from '../../lib/db/queries/traversal'
import { registerWorker, sweep } from '../../lib/db/queries/workers'
import { indexGraph } from '../../lib/engine/graph'
import type { GraphIndex } from '../../lib/engine/types'
import type { ClaimedJob, FinishRequest } from '../../lib/engine/ports'
import { nodeId, parseNodeId } from '../../lib/engine/types'
import type { TestCluster } from '../helpers/cluster'
import type { TestDatabase } from '../helpers/db'
import { workerlessCluster } from '../helpers/workerless'

let db: TestDatabase
let c: TestCluster
workerlessCluster((d, cl) => ((db = d), (c = cl)))

/**
 * Statistics change when ANALYZE runs, and with them every cached plan. Left to
 * autovacuum, an ANALYZE landed inside a measured window now and then (this
 * file failed in about one full-suite run of three, each time on another
 * table), and a plan it led to could read a whole table per step. So
 * autovacuum is off for this file's database, and each measured window
 * analyzes at fixed points instead (ANALYZE_AT, fractions of its steps):
 * every window runs on plans made from the statistics before it and from
 * those taken at each point, the same ones in every run. Each point has found
 * its own plan that read rows by something other than their key.
 */
const ANALYZE_AT = [0.1, 0.5, 0.9]

beforeAll(async () => {
  await c.db.pool.query(`DO $$ DECLARE t text; BEGIN
    FOR t IN SELECT relname FROM pg_stat_user_tables LOOP
      EXECUTE format('ALTER TABLE %I SET (autovacuum_enabled = false, toast.autovacuum_enabled = false)', t);
    END LOOP; END $$`)
})

const ENTRY_POINTS = ['kiln_begin_node', 'kiln_claim_jobs', 'kiln_finish_node', 'kiln_finish_nodes', 'kiln_replace_node', 'kiln_replace_nodes', 'kiln_mark_in_progress', 'kiln_node_progress', 'kiln_settle', 'kiln_heartbeat']

test('every node-step entry point runs with index lookups and generic plans', async () => {
  const { rows } = await c.db.pool.query(`SELECT proname, proconfig FROM pg_proc WHERE proname = ANY($1)`, [ENTRY_POINTS])
  expect(rows.map((r) => r.proname).sort()).toEqual([...ENTRY_POINTS].sort())
  for (const r of rows) expect(r.proconfig, r.proname).toEqual(expect.arrayContaining(['enable_seqscan=off', 'plan_cache_mode=force_generic_plan']))
})

/** `n` independent OS::Heat::None resources. */
function wideTemplate(n: number): string {
  return JSON.stringify({
    heat_template_version: '2018-08-31',
    resources: Object.fromEntries(Array.from({ length: n }, (_, i) => [`r${i}`, { type: 'OS::Heat::None' }])),
  })
}

/** A chain of `n` OS::Heat::None resources, each needing the one before. */
function chainTemplate(n: number): string {
  return JSON.stringify({
    heat_template_version: '2018-08-31',
    resources: Object.fromEntries(Array.from({ length: n }, (_, i) => [`r${i}`, i ? { type: 'OS::Heat::None', depends_on: [`r${i - 1}`] } : { type: 'OS::Heat::None' }])),
  })
}

test('a chain run after statistics said the sync tables were empty scans none of them sequentially', async () => {
  const N = 120
  await c.db.pool.query('VACUUM ANALYZE sync_input, sync_point, job')
  const worker = crypto.randomUUID()
  await registerWorker(c.db.pool, worker, 4, 'test')
  const res = await c.services.create(c.actor, { name: 'plans', template: chainTemplate(N) })

  // One connection runs every step, so its statistics are the whole story.
  const steps = new pg.Pool({ connectionString: db.url, max: 1 })
  const seqScans = async () => Object.fromEntries((await tableStats(steps)).filter((t) => ['sync_input', 'sync_point'].includes(t.table)).map((t) => [t.table, t.seqScans]))
  try {
    const before = await seqScans()
    expect(await runByHand(steps, worker, res.traversalId!, 'CREATE')).toBe(N)
    await new Promise((r) => setTimeout(r, 50))
    expect(await seqScans()).toEqual(before)
  } finally {
    await steps.end()
  }
})

type Action = 'CREATE' | 'UPDATE' | 'REPLACE' | 'DELETE'
/** Told how many steps were just run (a measured window analyzes at its points: ANALYZE_AT). */
type Tick = (steps: number) => Promise<void>

/** A worker's finish of a node that changed nothing outside: successors from the stored graph, claim and begin inline. */
function finishRequest(index: GraphIndex, job: ClaimedJob, action: Action): FinishRequest {
  const begun = job.begun
  if (begun?.outcome !== 'locked') throw new Error(`not begun: ${begun?.outcome}`)
  const key = { rid: job.graphKeyId ?? job.resourceId!, update: job.isUpdate! }
  const id = nodeId(key)
  const deletes = !key.update && (action === 'DELETE' || action === 'REPLACE')
  const done = { status: 'COMPLETE' as const, statusReason: 'state changed' }
  return {
    ok: true,
    reason: key.update || deletes ? 'state changed' : 'unchanged',
    set: key.update ? { ...done, action: action === 'REPLACE' ? 'CREATE' : action, currentTemplateId: begun.traversal.rawTemplateId } : deletes ? { ...done, action: 'DELETE' } : {},
    deleted: deletes,
    payload: null,
    successors: (index.requiredBy.get(id) ?? []).map(parseNodeId),
    isRoot: index.roots.has(id),
    claim: true,
    claimMax: 64,
  }
}

/**
 * Run every node of a traversal on one connection as a worker would with
 * actions that change nothing outside (successors from the stored graph,
 * claim and begin inline), until none is left. With `batch` > 0, the jobs in
 * hand are finished `batch` at a time in kiln_finish_nodes calls, as a worker
 * sends the finishes that are ready together. Returns how many steps it ran.
 */
async function runByHand(steps: pg.Pool, worker: string, traversalId: string, action: Action, batch = 0, onSteps: Tick = async () => {}): Promise<number> {
  const index = indexGraph((await loadTraversal(steps, traversalId))!.graph)
  const request = (job: ClaimedJob) => finishRequest(index, job, action)
  let queue = await claimAndBeginJobs(steps, worker, 64, 60_000)
  let ran = 0
  while (queue.length) {
    const before = ran
    if (batch) {
      const jobs = queue.splice(0, batch)
      const results = await finishNodes(steps, worker, jobs.map((job) => ({ job, req: request(job) })), 60_000)
      for (const out of results) {
        if (out.outcome !== 'ok') throw new Error(out.outcome)
        queue.push(...out.claimed)
      }
      ran += jobs.length
    } else {
      const job = queue.shift()!
      if (job.begun?.outcome === 'stale' || job.begun?.outcome === 'blocked') {
        // A superseded traversal's queued job (dropped), or a node whose row an older
        // traversal still holds (parked: the holder's finish retriggers it).
      } else if (action === 'REPLACE' && job.isUpdate && job.resourceId === (job.graphKeyId ?? job.resourceId) && job.begun?.outcome === 'locked') {
        // The old row's update node hands itself to a new row, which is claimed and begun in the same call.
        const requires = job.begun.inputs.flatMap((p) => (p ? [p.id] : []))
        const res = await replaceNode(steps, worker, job, { type: 'OS::Heat::None', requires, reason: 'replace', claim: true }, 60_000)
        if (res.outcome !== 'ok' || !res.claimed) throw new Error(`replace: ${res.outcome}`)
        queue.push(res.claimed)
      } else {
        const out = await finishNode(steps, worker, job, request(job), 60_000)
        if (out.outcome !== 'ok') throw new Error(out.outcome)
        queue.push(...out.claimed)
      }
      if (job.begun?.outcome === 'locked') ran++
    }
    await onSteps(ran - before)
    if (!queue.length) queue = await claimAndBeginJobs(steps, worker, 64, 60_000)
  }
  return ran
}

/** Per table: sequential scans and rows read (index fetches and sequential reads), as the statistics have them after `steps` flushed its own. */
async function tableStats(steps: pg.Pool): Promise<{ table: string; seqScans: number; rowsRead: number }[]> {
  await steps.query('SELECT pg_stat_force_next_flush()')
  await steps.query('SELECT 1') // goes idle: the counters are flushed
  const { rows } = await steps.query(`SELECT relname, seq_scan, coalesce(idx_tup_fetch, 0) + seq_tup_read AS n FROM pg_stat_user_tables`)
  return rows.map((r) => ({ table: String(r.relname), seqScans: Number(r.seq_scan), rowsRead: Number(r.n) }))
}

async function rowsRead(steps: pg.Pool): Promise<Map<string, number>> {
  return new Map((await tableStats(steps)).map((t) => [t.table, t.rowsRead]))
}

/** Rows read per node step, by table, while `run` steps a traversal of `nodes` nodes. */
/**
 * The service calls that start each traversal run on the cluster's own pool,
 * whose connections may flush their statistics seconds after going idle: a
 * submit's reads flushed inside the measured window would count as the
 * steps'. Every connection of that pool flushes first (one query per
 * connection, held at once so that each lands on its own). Added after one
 * full-suite run measured 36 job rows per node for a delete (about 2 when this
 * file runs alone) while the finish function was being changed; whether this
 * was the cause was not pinned down.
 */
async function flushPoolStats(pool: pg.Pool): Promise<void> {
  const clients = await Promise.all(Array.from({ length: pool.options.max ?? 10 }, () => pool.connect()))
  try {
    for (const client of clients) await client.query('SELECT pg_stat_force_next_flush()')
    for (const client of clients) await client.query('SELECT 1')
  } finally {
    for (const client of clients) client.release()
  }
}

/**
 * Rows read per node while `run` steps `expected` steps of a traversal of
 * `nodes` nodes, ANALYZE running (on the cluster's pool: its sampling does not
 * show in the scan counters read here) as the window passes each ANALYZE_AT point.
 */
async function readsPerNode(steps: pg.Pool, nodes: number, expected: number, run: (tick: Tick) => Promise<number>) {
  await flushPoolStats(c.db.pool)
  const points = ANALYZE_AT.map((f) => Math.max(1, Math.round(f * expected)))
  let done = 0
  const tick: Tick = async (n) => {
    const was = done
    done += n
    if (points.some((p) => was < p && done >= p)) await c.db.pool.query('ANALYZE')
  }
  const before = await rowsRead(steps)
  const ran = await run(tick)
  const after = await rowsRead(steps)
  const perNode = Object.fromEntries([...after].map(([t, n]) => [t, (n - (before.get(t) ?? 0)) / nodes]).filter(([, n]) => (n as number) > 0)) as Record<string, number>
  return { ran, perNode, max: Math.max(...Object.values(perNode)) }
}

test('every step of a create, an in-place update, a replace-all and a delete reads rows by key, whatever the statistics', async () => {
  // Cached generic plans are made once per connection from whatever the
  // statistics say then (the test above left them saying "empty"). Plans
  // made that way once read, per step, every sync point of the traversal
  // (through a second index on (traversal_id, state)) and every event of the
  // stack (max(seq) through an index on (stack_id, resource_name)); and each
  // no-op cleanup node completed inline at the end of an update joined its
  // successors to all of the traversal's sync points. Each O(N) per step, so
  // O(N²) per traversal. By key, a step reads a handful of rows of any table.
  const N = 120
  const template = chainTemplate(N)
  const worker = crypto.randomUUID()
  await registerWorker(c.db.pool, worker, 64, 'test')
  const steps = new pg.Pool({ connectionString: db.url, max: 1 })
  try {
    const created = await c.services.create(c.actor, { name: 'by-key', template })
    const create = await readsPerNode(steps, N, N, (tick) => runByHand(steps, worker, created.traversalId!, 'CREATE', 0, tick))
    expect(create.ran).toBe(N)

    const updated = await c.services.update(c.actor, 'by-key', { template })
    const update = await readsPerNode(steps, 2 * N, N, (tick) => runByHand(steps, worker, updated.traversalId!, 'UPDATE', 0, tick))
    const { rows } = await c.db.pool.query(`SELECT status, (SELECT count(*)::int FROM event WHERE traversal_id = $1 AND (data->>'inline')::boolean) AS inline FROM stack WHERE id = $2`, [updated.traversalId, updated.stack.id])
    expect(rows[0].status).toBe('COMPLETE')
    // Every cleanup node, a no-op, is completed inline: early, in its own update's step.
    expect(rows[0].inline).toBe(N)
    expect(update.ran).toBe(N)

    const replaced = await c.services.update(c.actor, 'by-key', { template })
    // Every node: the update node's replace call, the new row's create, the old row's delete.
    const replace = await readsPerNode(steps, 3 * N, 3 * N, (tick) => runByHand(steps, worker, replaced.traversalId!, 'REPLACE', 0, tick))
    expect(replace.ran).toBe(3 * N)
    const { rows: live } = await c.db.pool.query(`SELECT count(*)::int AS n, count(*) FILTER (WHERE replaces IS NULL)::int AS settled FROM resource WHERE stack_id = $1`, [replaced.stack.id])
    expect(live[0]).toEqual({ n: N, settled: N })

    const deleted = await c.services.delete(c.actor, 'by-key')
    const del = await readsPerNode(steps, N, N, (tick) => runByHand(steps, worker, deleted.traversalId!, 'DELETE', 0, tick))
    expect(del.ran).toBe(N)
    // By key: at most 7 rows of any table per node (measured); O(N) per node is over a hundred.
    expect(create.max, JSON.stringify(create.perNode)).toBeLessThan(20)
    expect(update.max, JSON.stringify(update.perNode)).toBeLessThan(20)
    expect(replace.max, JSON.stringify(replace.perNode)).toBeLessThan(20)
    expect(del.max, JSON.stringify(del.perNode)).toBeLessThan(20)
  } finally {
    await steps.end()
  }
})

test('finishes that end together, batched, read rows by key too', async () => {
  // Four layers of 30; each node needs two of the layer before. The jobs in
  // hand go BATCH at a time in kiln_finish_nodes calls, which lock the batch's
  // stacks, rows and sync points up front and begin what they make ready. Small
  // batches, as a worker's usually are: a statement that reads a whole table
  // once per batch then shows at a table's size / BATCH per node (one walked
  // every resource row of the database per batch, 60 per node here; hidden
  // when every job in hand went in one call of 30).
  const BATCH = 4
  const layers = 4
  const width = 30
  const N = layers * width
  const template = JSON.stringify({
    heat_template_version: '2018-08-31',
    resources: Object.fromEntries(Array.from({ length: N }, (_, i) => {
      const layer = Math.floor(i / width)
      const pos = i % width
      const deps = layer ? [`r${(layer - 1) * width + pos}`, `r${(layer - 1) * width + ((pos + 1) % width)}`] : []
      return [`r${i}`, deps.length ? { type: 'OS::Heat::None', depends_on: deps } : { type: 'OS::Heat::None' }]
    })),
  })
  const worker = crypto.randomUUID()
  await registerWorker(c.db.pool, worker, 64, 'test')
  const steps = new pg.Pool({ connectionString: db.url, max: 1 })
  try {
    const created = await c.services.create(c.actor, { name: 'batched', template })
    const create = await readsPerNode(steps, N, N, (tick) => runByHand(steps, worker, created.traversalId!, 'CREATE', BATCH, tick))
    expect(create.ran).toBe(N)
    const updated = await c.services.update(c.actor, 'batched', { template })
    const update = await readsPerNode(steps, 2 * N, N, (tick) => runByHand(steps, worker, updated.traversalId!, 'UPDATE', BATCH, tick))
    const { rows } = await c.db.pool.query(`SELECT status FROM stack WHERE id = $1`, [updated.stack.id])
    expect(rows[0].status).toBe('COMPLETE')
    // Measured: at most 7 rows of any table per node (resource, in the create). Before, 49.2 resource
    // rows per node in the create (the rows locked through a merge join along the whole primary key).
    expect(create.max, JSON.stringify(create.perNode)).toBeLessThan(20)
    expect(update.max, JSON.stringify(update.perNode)).toBeLessThan(20)
  } finally {
    await steps.end()
  }
})

test('claims among several live workers and a sweep of a traversal in flight read rows by key, or each row once', async () => {
  // The claim counts the ready jobs (up to eight shares) and the live workers
  // that have not claimed just now, to take a fair share; the sweeper looks
  // for lost nodes among every sync point of a running traversal. Each must
  // stay O(1) per job claimed and O(N) per sweep, not O(N) per job or O(N²).
  const N = 200
  const template = wideTemplate(N)
  const worker = crypto.randomUUID()
  await registerWorker(c.db.pool, worker, 64, 'test')
  for (let i = 0; i < 3; i++) await registerWorker(c.db.pool, crypto.randomUUID(), 64, 'test')
  const steps = new pg.Pool({ connectionString: db.url, max: 1 })
  try {
    const created = await c.services.create(c.actor, { name: 'claims-and-sweeps', template })
    let claimed = 0
    const claims = await readsPerNode(steps, 64, 64, async (tick) => {
      while (claimed < 64) {
        const jobs = await claimAndBeginJobs(steps, worker, 8, 60_000)
        // Four live workers, none of the others claiming: a share of 64 counted / 4, capped at the 8 asked for.
        expect(jobs.length).toBe(8)
        claimed += jobs.length
        await tick(jobs.length)
      }
      return claimed
    })
    expect(claims.ran).toBe(64)

    // Every node old enough to count as lost if it had no job: the sweep must look at each once.
    await c.db.pool.query(`UPDATE sync_point SET updated_at = now() - interval '1 minute' WHERE traversal_id = $1`, [created.traversalId])
    let report: Awaited<ReturnType<typeof sweep>> | null = null
    const swept = await readsPerNode(steps, N, 1, async () => {
      report = await sweep(steps, 60_000)
      return N
    })
    // 64 nodes running on live locks, the rest READY with their jobs: nothing is lost.
    expect(report).toMatchObject({ broken: 0, requeued: 0, released: 0, timedOut: 0 })

    // The worker dies holding its 64 locks: one sweep breaks them all and queues their nodes again.
    await c.db.pool.query(`UPDATE worker SET heartbeat_at = now() - interval '10 minutes' WHERE id = $1`, [worker])
    await c.db.pool.query(`UPDATE resource SET lease_expires_at = now() - interval '1 second' WHERE engine_id = $1`, [worker])
    await c.db.pool.query(`UPDATE job SET locked_at = now() - interval '10 minutes' WHERE locked_by = $1`, [worker])
    const broke = await readsPerNode(steps, N, 1, async () => {
      report = await sweep(steps, 60_000)
      return N
    })
    expect(report).toMatchObject({ broken: 64, requeued: 64 })
    const { rows: left } = await c.db.pool.query(`SELECT count(*) FILTER (WHERE locked_by IS NULL)::int AS free, count(*)::int AS n FROM job WHERE traversal_id = $1`, [created.traversalId])
    expect(left[0]).toEqual({ free: N, n: N })

    // Measured: 11 job rows per claimed job (the count of up to 64 ready jobs per claim of 8) and 2 per node
    // per sweep. Before, a bitmap scan counted the whole queue on every claim (31.5 per job here, growing
    // with N) and the lost-node check read the traversal's queue once per node (783 per node at N = 1,600).
    // Later, after an ANALYZE: 14.7 (each claim walked the job key up to the jobs it took) and 21.5 (the
    // check for other claimers read every claimed job once per worker).
    expect(claims.max, JSON.stringify(claims.perNode)).toBeLessThan(13)
    expect(swept.max, JSON.stringify(swept.perNode)).toBeLessThan(10)
    // Breaking 64 locks: 5.3 job rows per node (measured: the queue read a few times, once per sweep step);
    // one scan of the queue per broken lock read 68 per node here.
    expect(broke.max, JSON.stringify(broke.perNode)).toBeLessThan(10)
  } finally {
    await steps.end()
  }
})

test('while a traversal fails, each finish checks the jobs in flight, not the whole queue', async () => {
  // One node of a wide create fails; the 63 others in flight finish, and each
  // finish settles (kiln_settle), which fails the stack once nothing is in
  // flight. That check once searched the traversal's queue every time
  // (15.7 job rows per finish for 800 nodes, growing with N: O(N × in flight) per failure).
  const N = 800
  const template = wideTemplate(N)
  const worker = crypto.randomUUID()
  await registerWorker(c.db.pool, worker, 64, 'test')
  // The claims below take the oldest ready jobs: none of a stack an earlier test left in the queue.
  // Then statistics that say the queue is empty, as the first test's do for the sync tables.
  await c.db.pool.query(`DELETE FROM job`)
  await c.db.pool.query('VACUUM ANALYZE job')
  const steps = new pg.Pool({ connectionString: db.url, max: 1 })
  try {
    const created = await c.services.create(c.actor, { name: 'failing', template, disableRollback: true })
    const jobs: ClaimedJob[] = []
    for (let i = 0; i < 8; i++) jobs.push(...(await claimAndBeginJobs(steps, worker, 8, 60_000)))
    expect(jobs.length).toBe(64)
    const finish = async (job: ClaimedJob, ok: boolean) => {
      const set = { action: 'CREATE' as const, status: ok ? ('COMPLETE' as const) : ('FAILED' as const), statusReason: ok ? 'state changed' : 'boom' }
      const out = await finishNode(steps, worker, job, { ok, reason: set.statusReason, set, payload: null, successors: [], isRoot: true, claim: false }, 60_000)
      expect(out.outcome).toBe('ok')
    }
    // Measured: the failure and the 62 finishes after it, each with its settle. The last
    // finish (after the window) fails the stack and drops the queue, once, O(N).
    const last = jobs.pop()!
    const failing = await readsPerNode(steps, jobs.length, jobs.length, async (tick) => {
      for (const [i, job] of jobs.entries()) {
        await finish(job, i > 0)
        await tick(1)
      }
      return jobs.length
    })
    const { rows: before } = await c.db.pool.query(`SELECT status FROM stack WHERE id = $1`, [created.stack.id])
    expect(before[0].status).toBe('IN_PROGRESS')
    await finish(last, true)
    const { rows } = await c.db.pool.query(`SELECT status FROM stack WHERE id = $1`, [created.stack.id])
    expect(rows[0].status).toBe('FAILED')
    // Per finish: 3 job rows (measured); reading the queue to find a job in flight, 15.7 at 800 nodes, growing with N.
    expect(failing.max, JSON.stringify(failing.perNode)).toBeLessThan(8)
  } finally {
    await steps.end()
  }
})

test('an update submitted over a running one: stale jobs, parked nodes and their retriggers read rows by key too', async () => {
  // The first update's worker holds 64 rows when the second is submitted: the
  // first's queued jobs answer 'stale', the second's nodes on held rows park
  // behind the holder, and the holder's (stale) finishes retrigger them.
  const N = 400
  const template = wideTemplate(N)
  const worker = crypto.randomUUID()
  await registerWorker(c.db.pool, worker, 64, 'test')
  await c.db.pool.query(`DELETE FROM job`)
  const steps = new pg.Pool({ connectionString: db.url, max: 1 })
  try {
    const created = await c.services.create(c.actor, { name: 'overlap', template })
    expect(await runByHand(steps, worker, created.traversalId!, 'CREATE')).toBe(N)
    const first = await c.services.update(c.actor, 'overlap', { template })
    const held: ClaimedJob[] = []
    for (let i = 0; i < 8; i++) held.push(...(await claimAndBeginJobs(steps, worker, 8, 60_000)))
    expect(held.filter((j) => j.begun?.outcome === 'locked')).toHaveLength(64)
    const firstIndex = indexGraph((await loadTraversal(steps, first.traversalId!))!.graph)
    const second = await c.services.update(c.actor, 'overlap', { template })
    const reads = await readsPerNode(steps, 2 * N, N + held.length, async (tick) => {
      let ran = await runByHand(steps, worker, second.traversalId!, 'UPDATE', 0, tick)
      for (const job of held) {
        expect((await finishNode(steps, worker, job, finishRequest(firstIndex, job, 'UPDATE'), 60_000)).outcome).toBe('ok')
        await tick(1)
      }
      ran += await runByHand(steps, worker, second.traversalId!, 'UPDATE', 0, tick)
      return ran
    })
    const { rows } = await c.db.pool.query(
      `SELECT status, (SELECT count(*)::int FROM event WHERE traversal_id = $1 AND (data->>'retriggered')::boolean) AS retriggered FROM stack WHERE id = $2`,
      [second.traversalId, second.stack.id],
    )
    expect(rows[0]).toEqual({ status: 'COMPLETE', retriggered: 64 })
    // Measured: at most 9.9 rows of any table per node (job: the claims' counts of a queue holding both traversals' jobs).
    expect(reads.max, JSON.stringify(reads.perNode)).toBeLessThan(20)
  } finally {
    await steps.end()
  }
})
