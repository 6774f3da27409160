/**
 * kiln_claim_jobs claims and begins in one transaction. A begin inside a claim
 * must never wait for a lock (it holds later locks of the lock order): when
 * the node's row is locked by someone else, the job comes back claimed but not
 * begun, nothing about the node changes, and a begin of its own takes it once
 * the row is free.
 */
import crypto from 'node:crypto'
import pg from 'pg'
import { expect, test } from 'vitest'
import { beginNode } from '../../lib/db/queries/node'
import { claimAndBeginJobs } from '../../lib/db/queries/queue'
import { registerWorker } from '../../lib/db/queries/workers'
import type { TestCluster } from '../helpers/cluster'
import type { TestDatabase } from '../helpers/db'
import { notificationsDuring } from '../helpers/notifications'
import { workerlessCluster } from '../helpers/workerless'

let db: TestDatabase
let c: TestCluster
workerlessCluster((d, cl) => ((db = d), (c = cl)))

const LEASE_MS = 60_000
const TEMPLATE = 'heat_template_version: 2018-08-31\nresources:\n  a: {type: OS::Heat::None}\n  b: {type: OS::Heat::None}\n'

test('a claim begins the nodes it can lock at once and hands back, unbegun, the one whose row is busy', async () => {
  const worker = crypto.randomUUID()
  await registerWorker(c.db.pool, worker, 4, 'test')
  const res = await c.services.create(c.actor, { name: 'claim-later', template: TEMPLATE })
  const { rows } = await c.db.pool.query(`SELECT id, name FROM resource WHERE stack_id = $1 ORDER BY name`, [res.stack.id])
  const [a, b] = rows as [{ id: number; name: string }, { id: number; name: string }]

  // Someone else holds row b (a row lock, as a concurrent step would).
  const other = new pg.Client({ connectionString: db.url })
  await other.connect()
  try {
    await other.query('BEGIN')
    await other.query('SELECT 1 FROM resource WHERE id = $1 FOR UPDATE', [b.id])

    const claimed = await claimAndBeginJobs(c.db.pool, worker, 10, LEASE_MS)
    const byRow = new Map(claimed.map((j) => [j.resourceId, j]))
    expect(claimed).toHaveLength(2)
    expect(byRow.get(a.id)?.begun?.outcome).toBe('locked')
    expect(byRow.get(b.id)?.begun).toBeUndefined()
    const state = async (rid: number) =>
      (await c.db.pool.query(`SELECT state FROM sync_point WHERE traversal_id = $1 AND resource_id = $2 AND is_update`, [res.traversalId, rid])).rows[0].state
    expect(await state(a.id)).toBe('RUNNING')
    expect(await state(b.id)).toBe('READY')
    const { rows: lock } = await c.db.pool.query('SELECT engine_id FROM resource WHERE id = $1', [b.id])
    expect(lock[0].engine_id).toBeNull()

    await other.query('COMMIT')
    const begun = await beginNode(c.db.pool, worker, LEASE_MS, byRow.get(b.id)!)
    expect(begun.outcome).toBe('locked')
    expect(await state(b.id)).toBe('RUNNING')
  } finally {
    await other.end()
  }
})

test('a new traversal wakes the workers with its id, so that they load its template and graph while they claim', async () => {
  const { value: res, payloads } = await notificationsDuring(db.url, 'kiln_jobs', () => c.services.create(c.actor, { name: 'claim-notify', template: TEMPLATE }))
  expect(payloads).toContain(res.traversalId)
})
