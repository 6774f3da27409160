/**
 * A claim takes a fair share of a burst of ready jobs, not all it has room
 * for (kiln_claim_jobs): with other live workers idle, the first claimer takes
 * ceil(available / claimers) and announces the rest with a NOTIFY kiln_jobs;
 * a worker that just took its share does not count, so the next claimer takes
 * the rest; a worker alone, or beside workers that are dead or stopped, takes
 * everything and wakes nobody.
 */
import crypto from 'node:crypto'
import { expect, test } from 'vitest'
import { claimAndBeginJobs } from '../../lib/db/queries/queue'
import { registerWorker, setWorkerState } from '../../lib/db/queries/workers'
import type { TestCluster } from '../helpers/cluster'
import type { TestDatabase } from '../helpers/db'
import { notificationsDuring } from '../helpers/notifications'
import { workerlessCluster } from '../helpers/workerless'

let db: TestDatabase
let c: TestCluster
workerlessCluster((d, cl) => ((db = d), (c = cl)))

const LEASE_MS = 60_000

function tenRoots(): string {
  const lines = ['heat_template_version: 2018-08-31', 'resources:']
  for (let i = 0; i < 10; i++) lines.push(`  r${i}: {type: OS::Heat::None}`)
  return lines.join('\n') + '\n'
}

/** Live stand-in workers with these job slots (the workerless helper stops them after the test). */
async function workers(...slots: number[]): Promise<string[]> {
  const ids = slots.map(() => crypto.randomUUID())
  for (const [i, id] of ids.entries()) await registerWorker(c.db.pool, id, slots[i]!, 'test')
  return ids
}

/** A stack whose ten roots are the only ready jobs (another test's leftovers are dropped). */
async function tenReadyRoots(name: string): Promise<string> {
  await c.db.pool.query('DELETE FROM job WHERE locked_by IS NULL')
  return (await c.services.create(c.actor, { name, template: tenRoots() })).stack.id
}

/** A claim by `worker` and how many kiln_jobs notifications it sent. */
async function claimBy(worker: string, limit: number) {
  const { value, payloads } = await notificationsDuring(db.url, 'kiln_jobs', () => claimAndBeginJobs(c.db.pool, worker, limit, LEASE_MS))
  return { value, notified: payloads.length }
}

async function unclaimed(stackId: string): Promise<number> {
  const { rows } = await c.db.pool.query('SELECT count(*)::int AS n FROM job WHERE stack_id = $1 AND locked_by IS NULL', [stackId])
  return rows[0].n
}

test('two idle workers: the first claim takes half of ten ready roots and wakes the other; the claims that follow take the rest', async () => {
  const [a, b] = (await workers(64, 64)) as [string, string]
  const stack = await tenReadyRoots('share-two')
  expect(await unclaimed(stack)).toBe(10)

  const first = await claimBy(a, 64)
  expect(first.value).toHaveLength(5)
  expect(first.notified).toBe(1)
  expect(first.value.every((j) => j.begun?.outcome === 'locked')).toBe(true)

  // b: a has just taken its share and does not count, so b takes the rest at once
  // (were a's claim older than the window, b would take a share and announce the rest:
  // either way every round takes at least one, and nothing is left unannounced).
  let claims = 1
  let taken = first.value.length
  let claimer = b
  while (taken < 10) {
    const round = await claimBy(claimer, 64)
    expect(round.value.length).toBeGreaterThan(0)
    taken += round.value.length
    expect(round.notified).toBe(taken < 10 ? 1 : 0)
    claimer = claimer === a ? b : a
    claims++
  }
  expect(taken).toBe(10)
  expect(claims).toBeLessThanOrEqual(4)
  expect(await unclaimed(stack)).toBe(0)
})

test('a worker whose peers are stopped or silent past the lease takes the whole burst and wakes nobody', async () => {
  const [alone, stopped, silent] = (await workers(64, 64, 64)) as [string, string, string]
  await setWorkerState(c.db.pool, stopped, 'stopped')
  await c.db.pool.query(`UPDATE worker SET heartbeat_at = now() - interval '2 minutes' WHERE id = $1`, [silent])
  const stack = await tenReadyRoots('share-alone')

  const { value, notified } = await claimBy(alone, 64)
  expect(value).toHaveLength(10)
  expect(notified).toBe(0)
  expect(await unclaimed(stack)).toBe(0)
})

test('a share never exceeds the room the claimer has; what it leaves is announced', async () => {
  const [a] = (await workers(2, 64)) as [string, string]
  const stack = await tenReadyRoots('share-room')

  const { value, notified } = await claimBy(a, 2)
  expect(value).toHaveLength(2)
  expect(notified).toBe(1)
  expect(await unclaimed(stack)).toBe(8)
})
