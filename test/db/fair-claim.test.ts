/**
 * Claims are fair between projects (kiln_pick_jobs, lib/db/functions/22_claim.sql):
 * a project's backlog queued first does not go before another project's work
 * queued after it, a claim takes turns between the projects that have ready
 * jobs, and a project at its cap of a worker's slots gets nothing more from
 * that worker (the claim says it left such work behind).
 */
import crypto from 'node:crypto'
import { expect, test } from 'vitest'
import { claimFairly } from '../../lib/db/queries/queue'
import { registerWorker } from '../../lib/db/queries/workers'
import type { Actor } from '../../lib/services/stacks'
import type { TestCluster } from '../helpers/cluster'
import type { TestDatabase } from '../helpers/db'
import { workerlessCluster } from '../helpers/workerless'

let c: TestCluster
workerlessCluster((_d: TestDatabase, cl) => (c = cl))

const LEASE_MS = 60_000

function roots(n: number): string {
  const lines = ['heat_template_version: 2018-08-31', 'resources:']
  for (let i = 0; i < n; i++) lines.push(`  r${i}: {type: OS::Heat::None}`)
  return lines.join('\n') + '\n'
}

async function project(name: string): Promise<Actor> {
  const { rows } = await c.db.pool.query(`INSERT INTO project (name) VALUES ($1) RETURNING id`, [`${name}-${crypto.randomBytes(3).toString('hex')}`])
  return { projectId: rows[0].id, name }
}

/** A stack of `n` roots in `actor`'s project: `n` ready jobs, queued now (after whatever was queued before). */
async function ready(actor: Actor, n: number): Promise<string> {
  return (await c.services.create(actor, { name: `s-${crypto.randomBytes(3).toString('hex')}`, template: roots(n) })).stack.id
}

async function worker(): Promise<string> {
  const id = crypto.randomUUID()
  await registerWorker(c.db.pool, id, 64, 'test')
  return id
}

const byProject = (jobs: { projectId: string }[]) => {
  const out = new Map<string, number>()
  for (const j of jobs) out.set(j.projectId, (out.get(j.projectId) ?? 0) + 1)
  return out
}

async function emptyQueue() {
  await c.db.pool.query('DELETE FROM job')
}

test('a backlog queued first does not go before another project’s work: the claim takes turns', async () => {
  await emptyQueue()
  const a = await project('a')
  const b = await project('b')
  await ready(b, 20)
  await ready(a, 1)
  const w = await worker()
  // Oldest first, a claim of 4 would have taken four of b's; it takes a's one and three of b's.
  const first = await claimFairly(c.db.pool, w, 4, LEASE_MS)
  expect(byProject(first.jobs)).toEqual(new Map([[b.projectId, 3], [a.projectId, 1]]))
  expect(first.capped).toBe(false)
})

test('equal parts of the claim for projects with enough work; what one cannot use goes to the others', async () => {
  await emptyQueue()
  const a = await project('a')
  const b = await project('b')
  const d = await project('d')
  await ready(a, 10)
  await ready(b, 10)
  await ready(d, 1)
  const w = await worker()
  const claim = await claimFairly(c.db.pool, w, 9, LEASE_MS)
  expect(byProject(claim.jobs)).toEqual(new Map([[a.projectId, 4], [b.projectId, 4], [d.projectId, 1]]))
  // Each project's own jobs oldest first.
  const mine = claim.jobs.filter((j) => j.projectId === a.projectId).map((j) => j.id)
  const { rows } = await c.db.pool.query(`SELECT id FROM job WHERE project_id = $1 ORDER BY id LIMIT 4`, [a.projectId])
  expect(mine).toEqual(rows.map((r) => Number(r.id)))
})

test('more projects than the claim can serve: the fewest in flight first, then the longest waiting', async () => {
  await emptyQueue()
  const ps = [await project('p0'), await project('p1'), await project('p2'), await project('p3')]
  for (const p of ps) await ready(p, 2)
  const w = await worker()
  const first = await claimFairly(c.db.pool, w, 2, LEASE_MS, [], { cap: 64, used: new Map() })
  expect(byProject(first.jobs)).toEqual(new Map([[ps[0]!.projectId, 1], [ps[1]!.projectId, 1]]))
  // p0 and p1 now hold a slot each: p2 and p3 go next, though p0's and p1's second jobs are older.
  const next = await claimFairly(c.db.pool, w, 2, LEASE_MS, [], { cap: 64, used: byProject(first.jobs) })
  expect(byProject(next.jobs)).toEqual(new Map([[ps[2]!.projectId, 1], [ps[3]!.projectId, 1]]))
})

test('one free slot at a time: a backlog queued first does not keep a project that holds nothing from its turn', async () => {
  await emptyQueue()
  const a = await project('a')
  const b = await project('b')
  await ready(b, 50)
  await ready(a, 1)
  const w = await worker()
  // b holds one slot; the one free slot goes to a, whose job was queued after all of b's.
  const claim = await claimFairly(c.db.pool, w, 1, LEASE_MS, [], { cap: 64, used: new Map([[b.projectId, 1]]) })
  expect(byProject(claim.jobs)).toEqual(new Map([[a.projectId, 1]]))
})

test('a project at its cap of this worker’s slots gets nothing more, and the claim says it left work behind', async () => {
  await emptyQueue()
  const a = await project('a')
  const b = await project('b')
  await ready(b, 20)
  await ready(a, 2)
  const w = await worker()
  // b holds 3 of this worker's slots, its cap is 4: it may take one more; a takes all it has.
  const claim = await claimFairly(c.db.pool, w, 10, LEASE_MS, [], { cap: 4, used: new Map([[b.projectId, 3]]) })
  expect(byProject(claim.jobs)).toEqual(new Map([[b.projectId, 1], [a.projectId, 2]]))
  expect(claim.capped).toBe(true)
  // At its cap, b gets nothing; the claim finds nothing else.
  const again = await claimFairly(c.db.pool, w, 10, LEASE_MS, [], { cap: 4, used: new Map([[b.projectId, 4]]) })
  expect(again.jobs).toEqual([])
  expect(again.capped).toBe(true)
  // Under its cap again (a slot freed up), b's next job is claimed.
  const freed = await claimFairly(c.db.pool, w, 10, LEASE_MS, [], { cap: 4, used: new Map([[b.projectId, 3]]) })
  expect(byProject(freed.jobs)).toEqual(new Map([[b.projectId, 1]]))
})
