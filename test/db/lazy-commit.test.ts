/**
 * Lazy commits (kiln_commit_lazily, lib/db/functions/05_commit_lazily.sql): a node
 * step whose every row is of a state-only type the worker names commits with
 * synchronous_commit off (a claim, a finish, a batch, a replacement, an
 * in-progress mark); a step that releases or locks any other row waits for
 * the disk. Each case runs the real engine call inside an open
 * transaction and reads the setting that transaction would commit with.
 */
import crypto from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { finishNode, finishNodes, markInProgress, replaceNode } from '../../lib/db/queries/node'
import { claimAndBeginJobs } from '../../lib/db/queries/queue'
import { registerWorker } from '../../lib/db/queries/workers'
import type { ClaimedJob, FinishRequest } from '../../lib/engine/ports'
import { builtinTypes, createRegistry, stateOnlyTypeNames } from '../../lib/resources/registry'
import type { TestCluster } from '../helpers/cluster'
import type { TestDatabase } from '../helpers/db'
import { stopStandInWorkers, workerlessCluster } from '../helpers/workerless'

let db: TestDatabase
let c: TestCluster
workerlessCluster((d, cl) => ((db = d), (c = cl)))
// One connection: BEGIN, the engine call, the setting and COMMIT share it.
let one: pg.Pool
beforeAll(() => {
  one = new pg.Pool({ connectionString: db.url, max: 1 })
})
afterAll(async () => {
  await one?.end()
})

const LEASE_MS = 60_000
const NONE = ['OS::Heat::None']

/** Run `step` in a transaction; returns what synchronous_commit was when it committed. */
async function commitsWith(step: () => Promise<unknown>): Promise<string> {
  await one.query('BEGIN')
  try {
    await step()
    const { rows } = await one.query(`SELECT current_setting('synchronous_commit') AS v`)
    await one.query('COMMIT')
    return rows[0].v as string
  } catch (err) {
    await one.query('ROLLBACK')
    throw err
  }
}

/** A stack of `template` whose ready nodes a fresh worker has claimed and begun (lazily or not, as the test says). */
async function claimed(name: string, template: string, lazyTypes: string[] = []) {
  await c.db.pool.query('DELETE FROM job WHERE locked_by IS NULL')
  // Alone: a claim leaves a share of the burst to any other live worker (kiln_claim_jobs).
  await stopStandInWorkers(c)
  const worker = crypto.randomUUID()
  await registerWorker(c.db.pool, worker, 16, 'test')
  const res = await c.services.create(c.actor, { name, template })
  const { rows } = await c.db.pool.query(`SELECT id, name FROM resource WHERE stack_id = $1`, [res.stack.id])
  const id = Object.fromEntries(rows.map((r: { id: number; name: string }) => [r.name, r.id])) as Record<string, number>
  let jobs: ClaimedJob[] = []
  const setting = await commitsWith(async () => {
    jobs = await claimAndBeginJobs(one, worker, 10, LEASE_MS, lazyTypes)
  })
  expect(jobs.every((j) => j.begun?.outcome === 'locked')).toBe(true)
  return { worker, id, jobs, setting }
}

const done = (successors: number[]): FinishRequest => ({
  ok: true,
  set: { action: 'CREATE', status: 'COMPLETE' },
  resourceEvent: true,
  successors: successors.map((rid) => ({ rid, update: true })),
  isRoot: successors.length === 0,
  claim: true,
  claimMax: 4,
})

const PAIR = (a: string, b: string) => `heat_template_version: 2018-08-31
resources:
  a: {type: ${a}}
  b: {type: ${b}, depends_on: a}
`

test('the built-in state-only types are None, Value, RandomString, TestResource and the config holders', () => {
  expect(stateOnlyTypeNames(createRegistry(builtinTypes())).sort()).toEqual([
    'OS::Heat::CloudConfig',
    'OS::Heat::MultipartMime',
    'OS::Heat::None',
    'OS::Heat::RandomString',
    'OS::Heat::SoftwareConfig',
    'OS::Heat::StructuredConfig',
    'OS::Heat::TestResource',
    'OS::Heat::Value',
  ])
})

test('a claim that locks only state-only rows commits lazily; without the list it waits for the disk', async () => {
  expect((await claimed('claim-lazy', PAIR('OS::Heat::None', 'OS::Heat::None'), NONE)).setting).toBe('off')
  expect((await claimed('claim-durable', PAIR('OS::Heat::None', 'OS::Heat::None'))).setting).toBe('on')
  expect((await claimed('claim-other', PAIR('OS::Heat::TestResource', 'OS::Heat::None'), NONE)).setting).toBe('on')
  // Transaction-local: the next transaction on the connection is durable again.
  expect((await one.query(`SELECT current_setting('synchronous_commit') AS v`)).rows[0].v).toBe('on')
})

test('a finish commits lazily only when its own row and the successor it begins are state-only', async () => {
  const lazy = await claimed('finish-lazy', PAIR('OS::Heat::None', 'OS::Heat::None'), NONE)
  let out: Awaited<ReturnType<typeof finishNode>> | undefined
  expect(await commitsWith(async () => (out = await finishNode(one, lazy.worker, lazy.jobs[0]!, done([lazy.id.b!]), LEASE_MS, NONE)))).toBe('off')
  expect(out?.outcome === 'ok' && out.claimed[0]?.begun?.outcome).toBe('locked')

  // The successor it begins is not state-only: its action may touch the world, so its lock must be on disk first.
  const mixed = await claimed('finish-mixed', PAIR('OS::Heat::None', 'OS::Heat::TestResource'), NONE)
  expect(await commitsWith(() => finishNode(one, mixed.worker, mixed.jobs[0]!, done([mixed.id.b!]), LEASE_MS, NONE))).toBe('on')

  // Nor when the worker names no types (KILN_LAZY_COMMITS=false).
  const durable = await claimed('finish-durable', PAIR('OS::Heat::None', 'OS::Heat::None'), NONE)
  expect(await commitsWith(() => finishNode(one, durable.worker, durable.jobs[0]!, done([durable.id.b!]), LEASE_MS, []))).toBe('on')
})

test('a batch of finishes commits lazily only when every finish in it may', async () => {
  const template = `heat_template_version: 2018-08-31
resources:
  a: {type: OS::Heat::None}
  b: {type: OS::Heat::TestResource}
`
  const both = await claimed('batch-lazy', template, [...NONE, 'OS::Heat::TestResource'])
  const items = both.jobs.map((job) => ({ job, req: done([]) }))
  expect(await commitsWith(() => finishNodes(one, both.worker, items, LEASE_MS, [...NONE, 'OS::Heat::TestResource']))).toBe('off')

  const some = await claimed('batch-mixed', template, [...NONE, 'OS::Heat::TestResource'])
  const mixedItems = some.jobs.map((job) => ({ job, req: done([]) }))
  expect(await commitsWith(() => finishNodes(one, some.worker, mixedItems, LEASE_MS, NONE))).toBe('on')
})

test('a replacement commits lazily only when the old row, the new one and the node it begins are state-only', async () => {
  // The replace call releases the old row and begins its replacement: a replace-all's calls used
  // to wait for the disk each, queued on the stack's event lock (15 ms of wait per node, --profile).
  const replace = (type: string) => ({ type, requires: [], reason: 'replace', claim: true })
  const lazy = await claimed('replace-lazy', PAIR('OS::Heat::None', 'OS::Heat::None'), NONE)
  let out: Awaited<ReturnType<typeof replaceNode>> | undefined
  expect(await commitsWith(async () => (out = await replaceNode(one, lazy.worker, lazy.jobs[0]!, replace('OS::Heat::None'), LEASE_MS, NONE)))).toBe('off')
  expect(out?.outcome === 'ok' && out.claimed?.begun?.outcome).toBe('locked')

  // The replacement is of a type that may touch the world: its lock must be on disk before it acts.
  const other = await claimed('replace-other', PAIR('OS::Heat::None', 'OS::Heat::None'), NONE)
  expect(await commitsWith(() => replaceNode(one, other.worker, other.jobs[0]!, replace('OS::Heat::TestResource'), LEASE_MS, NONE))).toBe('on')

  // Nor when the worker names no types.
  const durable = await claimed('replace-durable', PAIR('OS::Heat::None', 'OS::Heat::None'), NONE)
  expect(await commitsWith(() => replaceNode(one, durable.worker, durable.jobs[0]!, replace('OS::Heat::None'), LEASE_MS, []))).toBe('on')
})

test('an UPDATE_IN_PROGRESS mark commits lazily only on a state-only row', async () => {
  // The mark holds the stack's event lock to its commit: waiting for the disk there held up every other step of the stack.
  const lazy = await claimed('mark-lazy', PAIR('OS::Heat::None', 'OS::Heat::None'), NONE)
  let ok: boolean | undefined
  expect(await commitsWith(async () => (ok = await markInProgress(one, lazy.worker, lazy.jobs[0]!, 'UPDATE', NONE)))).toBe('off')
  expect(ok).toBe(true)
  const { rows } = await c.db.pool.query(`SELECT action, status FROM resource WHERE id = $1`, [lazy.id.a])
  expect(rows[0]).toEqual({ action: 'UPDATE', status: 'IN_PROGRESS' })

  // A row of another type, or no list (KILN_LAZY_COMMITS=false): the mark waits for the disk.
  const other = await claimed('mark-other', PAIR('OS::Heat::TestResource', 'OS::Heat::None'), NONE)
  expect(await commitsWith(() => markInProgress(one, other.worker, other.jobs[0]!, 'UPDATE', NONE))).toBe('on')
  const durable = await claimed('mark-durable', PAIR('OS::Heat::None', 'OS::Heat::None'), NONE)
  expect(await commitsWith(() => markInProgress(one, durable.worker, durable.jobs[0]!, 'UPDATE', []))).toBe('on')
})
