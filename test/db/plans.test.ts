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
import { registerWorker } from '../../lib/db/queries/workers'
import type { ClaimedJob } from '../../lib/engine/ports'
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
