/**
 * A node that waits parks (lib/db/functions/25_park.sql): its row stays
 * locked, its worker slot is free. With real worker processes: a worker with
 * two slots runs other stacks while six wait conditions wait; a signal wakes
 * the one it is for; an update over a parked node waits for it (blocked) and is
 * retriggered when it finishes; a failing stack stops its parked nodes and
 * settles; a parked node survives the death of the worker that parked it; a
 * cancel without rollback leaves it waiting, as a running action goes on.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { TestCluster } from '../helpers/cluster'
import { testDatabase, type TestDatabase } from '../helpers/db'
import { gateResources, openGate } from '../helpers/gate'

let db: TestDatabase
let c: TestCluster

beforeAll(async () => {
  db = await testDatabase()
  // One worker with two slots: two waits that held their slots would stop everything else.
  c = await TestCluster.start(db.url, { workers: 1, concurrency: 2 })
}, 120_000)

afterAll(async () => {
  await c?.stop()
  await db?.drop()
})

const HOT = 'heat_template_version: 2018-08-31'

function gates(names: string[], extra: Record<string, unknown> = {}) {
  return { heat_template_version: '2018-08-31', resources: { ...Object.assign({}, ...names.map((n) => gateResources(n))), ...extra } }
}

async function create(name: string, template: string | Record<string, unknown>): Promise<string> {
  return (await c.services.create(c.actor, { name, template })).stack.id
}

/** Resolves once `n` nodes of the stack are parked: their jobs unclaimed and waiting, their rows held by no worker. */
async function parked(stackId: string, n: number): Promise<void> {
  await c.waitFor(async () => {
    const { rows } = await c.db.pool.query(
      `SELECT count(*)::int AS n FROM job j JOIN resource r ON r.id = j.resource_id
        WHERE j.stack_id = $1 AND j.parked_until IS NOT NULL AND j.locked_by IS NULL AND r.engine_id = kiln_parked_holder()`,
      [stackId],
    )
    return rows[0].n === n
  }, 60_000, `${n} parked node(s)`)
}

async function reason(stackId: string, name: string): Promise<string> {
  const { rows } = await c.db.pool.query(`SELECT status_reason FROM resource WHERE stack_id = $1 AND name = $2 ORDER BY id DESC LIMIT 1`, [stackId, name])
  return rows[0].status_reason
}

describe('parked nodes', () => {
  test('six waiting conditions hold none of a two-slot worker’s slots: another stack runs meanwhile; each signal wakes its own', async () => {
    const names = ['g0', 'g1', 'g2', 'g3', 'g4', 'g5']
    const waiting = await create('waits', gates(names))
    await parked(waiting, 6)
    const other = await create('meanwhile', `${HOT}\nresources:\n  a: {type: OS::Heat::TestResource}\n  b: {type: OS::Heat::TestResource, properties: {value: {get_attr: [a, output]}}}\n`)
    expect(await c.settle(other)).toBe('CREATE_COMPLETE')
    expect((await c.stack(waiting)).status).toBe('IN_PROGRESS')
    await openGate(c, waiting, 'g3')
    await c.waitFor(async () => {
      const { rows } = await c.db.pool.query(`SELECT status FROM resource WHERE stack_id = $1 AND name = 'g3'`, [waiting])
      return rows[0].status === 'COMPLETE'
    }, 60_000, 'g3 to complete')
    await parked(waiting, 5)
    for (const n of names) if (n !== 'g3') await openGate(c, waiting, n)
    expect(await c.settle(waiting)).toBe('CREATE_COMPLETE')
  })

  test('an update over a parked node is blocked by it, and retriggered when the signal lets it finish', async () => {
    const id = await create('update-over-park', gates(['gate']))
    await parked(id, 1)
    const { traversalId } = await c.services.update(c.actor, id, {
      template: gates(['gate'], { after: { type: 'OS::Heat::TestResource', properties: { value: 'v2' } } }),
    })
    // The new traversal's node for the gate finds the row held by the park.
    await c.waitFor(async () => {
      const { rows } = await c.db.pool.query(`SELECT state FROM sync_point WHERE traversal_id = $1 AND resource_id = (SELECT id FROM resource WHERE stack_id = $2 AND name = 'gate') AND is_update`, [traversalId, id])
      return rows[0]?.state === 'BLOCKED'
    }, 60_000, 'the update’s gate node to be blocked')
    expect((await c.stack(id)).status).toBe('IN_PROGRESS')
    await openGate(c, id)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    const { rows } = await c.db.pool.query(`SELECT count(*)::int AS n FROM event WHERE stack_id = $1 AND data->>'retriggered' = 'true'`, [id])
    expect(rows[0].n).toBeGreaterThan(0)
  })

  test('a failing stack stops its parked nodes at once and settles', async () => {
    const id = await create('fails-while-parked', gates(['gate', 'trigger'], {
      // Fails once `trigger` is opened, while `gate` is parked.
      broken: { type: 'OS::Heat::TestResource', properties: { fail: true, value: { get_attr: ['trigger', 'data'] } } },
    }))
    await parked(id, 2)
    await openGate(c, id, 'trigger')
    expect(await c.settle(id)).toBe('CREATE_FAILED')
    expect(await reason(id, 'gate')).toMatch(/^CREATE aborted \(the stack is failing: .*broken/)
    const { rows } = await c.db.pool.query(`SELECT count(*)::int AS n FROM job WHERE stack_id = $1`, [id])
    expect(rows[0].n).toBe(0)
  })

  test('a parked node outlives the worker that parked it: any worker resumes it', async () => {
    const id = await create('worker-dies', gates(['gate']))
    await parked(id, 1)
    const old = c.workers[0]!
    old.proc.kill('SIGKILL')
    await new Promise((r) => old.proc.once('exit', r))
    const fresh = c.spawnWorker()
    await c.waitFor(async () => fresh.id !== null, 60_000, 'the new worker')
    await openGate(c, id)
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
  })

  test('a cancel without rollback leaves a parked node waiting, as a running action goes on; it finishes when signalled', async () => {
    const id = await create('cancel-while-parked', gates(['gate']))
    await parked(id, 1)
    await c.services.cancel(c.actor, id, { rollback: false })
    expect(await c.settle(id)).toBe('CREATE_FAILED')
    await parked(id, 1)
    await openGate(c, id)
    await c.waitFor(async () => (await c.db.pool.query(`SELECT 1 FROM job WHERE stack_id = $1`, [id])).rows.length === 0, 60_000, 'the parked node to finish')
    const { rows } = await c.db.pool.query(`SELECT action, status, engine_id FROM resource WHERE stack_id = $1 AND name = 'gate'`, [id])
    expect(rows[0]).toEqual({ action: 'CREATE', status: 'COMPLETE', engine_id: null })
  })
})
