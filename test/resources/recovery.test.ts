/**
 * A failed resource recovered by looking, not replaced: a
 * Kiln::Postgres::Database holding rows survives an update that fails, a
 * worker SIGKILLed mid-update followed by the next update, and a stack check,
 * with its rows, its row in Kiln and its password intact. Before, a FAILED
 * row was always replaced, and the replacement set a new password on the
 * same database.
 *
 * Gates, never sleeps: the test holds the lock the update's `ALTER ROLE`
 * needs (an uncommitted change of the same role), waits until the server
 * shows the statement waiting for it, and then ends that statement's session
 * or kills the worker (as test/resources/postgres-target.test.ts does).
 */
import crypto from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { TestCluster } from '../helpers/cluster'
import { testDatabase, type TestDatabase } from '../helpers/db'
import { ownPostgres, type OwnPostgres } from '../helpers/own-postgres'

let db: TestDatabase
let target: OwnPostgres
let c: TestCluster
let admin: pg.Client

beforeAll(async () => {
  ;[db, target] = await Promise.all([testDatabase(), ownPostgres('recovery')])
  admin = new pg.Client({ connectionString: target.url })
  await admin.connect()
  c = await TestCluster.start(db.url, { workers: 1, env: { KILN_TARGET_DATABASE_URL: target.url } })
}, 120_000)

afterAll(async () => {
  await c?.stop()
  await admin?.end()
  await target?.stop()
  await db?.drop()
})

const template = (name: string, limit: number) =>
  JSON.stringify({
    heat_template_version: '2018-08-31',
    resources: { db: { type: 'Kiln::Postgres::Database', properties: { name, connection_limit: limit } } },
  })

const waitUntil = (what: string, cond: () => Promise<boolean>) => c.waitFor(cond, 30_000, what, 100)

/** The stack's rows named db (a replacement would add one), with what the engine stored. */
async function dbRows(stackId: string) {
  const { rows } = await c.db.pool.query(
    `SELECT id, action, status, status_reason, attributes->>'password' AS password, attributes->>'url' AS url, properties FROM resource WHERE stack_id = $1 AND name = 'db' ORDER BY id`,
    [stackId],
  )
  return rows as { id: number; action: string; status: string; status_reason: string; password: string; url: string; properties: Record<string, unknown> }[]
}

/** The tenant's own view: its rows, read with the password Kiln gave it at create. */
async function tenantRows(url: string): Promise<number[]> {
  const t = new pg.Client({ connectionString: url })
  await t.connect()
  try {
    return (await t.query('SELECT n FROM kept ORDER BY n')).rows.map((r) => r.n as number)
  } finally {
    await t.end()
  }
}

/** A session holding the lock `ALTER ROLE <name>` waits for (its own uncommitted change of that role), until `open()`. */
async function roleGate(name: string): Promise<{ open(): Promise<void> }> {
  const g = new pg.Client({ connectionString: target.url })
  await g.connect()
  await g.query('BEGIN')
  await g.query(`ALTER ROLE "${name}" CONNECTION LIMIT 19`)
  return {
    async open() {
      await g.query('ROLLBACK')
      await g.end()
    },
  }
}

/** The action's `ALTER ROLE` statements on the server, and whether they wait for a lock. */
async function alterRole(name: string): Promise<{ pid: number; waiting: boolean }[]> {
  const { rows } = await admin.query(`SELECT pid, wait_event_type = 'Lock' AS waiting FROM pg_stat_activity WHERE query LIKE $1 AND pid <> pg_backend_pid()`, [`ALTER ROLE "${name}" WITH %`])
  return rows
}

async function update(stackId: string, name: string, limit: number): Promise<void> {
  await c.services.update(c.actor, stackId, { template: template(name, limit) })
}

test('a database with rows survives a failed update, a worker killed mid-update and the next update, and a check: same row, same password, same rows', async () => {
  const name = `kiln_rec_${crypto.randomBytes(4).toString('hex')}`
  const { stack } = await c.services.create(c.actor, { name: 'recovered', template: template(name, -1) })
  expect(await c.settle(stack.id)).toBe('CREATE_COMPLETE')
  const [made] = await dbRows(stack.id)
  const tenant = new pg.Client({ connectionString: made!.url })
  await tenant.connect()
  await tenant.query('CREATE TABLE kept (n int); INSERT INTO kept VALUES (1), (2), (3)')
  await tenant.end()

  // 1. An update that fails: the session of its ALTER ROLE is ended while it waits at the gate.
  let gate = await roleGate(name)
  await update(stack.id, name, 5)
  await waitUntil('ALTER ROLE to wait at the gate', async () => (await alterRole(name)).some((r) => r.waiting))
  await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE $1 AND pid <> pg_backend_pid()', [`ALTER ROLE "${name}" WITH %`])
  expect(await c.settle(stack.id)).toBe('UPDATE_FAILED')
  await gate.open()
  expect((await dbRows(stack.id)).map((r) => `${r.action}_${r.status}`)).toEqual(['UPDATE_FAILED'])

  // 2. The next update looks first: the database is there, so it is updated in place.
  await update(stack.id, name, 6)
  expect(await c.settle(stack.id)).toBe('UPDATE_COMPLETE')

  // 3. A worker killed while its update waits at the gate; its lock is broken when the lease runs
  //    out and the node runs again in the same traversal, on a row now FAILED: looked at, updated in place.
  gate = await roleGate(name)
  await update(stack.id, name, 7)
  await waitUntil('ALTER ROLE to wait at the gate', async () => (await alterRole(name)).some((r) => r.waiting))
  const holder = (await c.rows(stack.id)).find((r) => r.engine_id)?.engine_id
  const victim = c.workers.find((w) => w.id === holder)
  expect(victim, 'a worker of this cluster holds the row').toBeDefined()
  victim!.proc.kill('SIGKILL')
  await new Promise((r) => victim!.proc.once('exit', r))
  await gate.open()
  c.spawnWorker()
  expect(await c.settle(stack.id)).toBe('UPDATE_COMPLETE')
  const events = await c.db.pool.query(`SELECT reason FROM event WHERE stack_id = $1 AND kind = 'lock' ORDER BY seq`, [stack.id])
  expect(events.rows.map((e) => e.reason)).toContain('Worker went down during resource UPDATE')

  // 4. ... then the next update, and a check.
  await update(stack.id, name, 8)
  expect(await c.settle(stack.id)).toBe('UPDATE_COMPLETE')
  await c.services.check(c.actor, stack.id)
  expect(await c.settle(stack.id)).toBe('CHECK_COMPLETE')

  const rows = await dbRows(stack.id)
  expect(rows[0]!.password).toBe(made!.password)
  expect(rows.map((r) => r.id)).toEqual([made!.id]) // never replaced
  expect(rows[0]!.properties.connection_limit).toBe(8)
  expect((await admin.query('SELECT datconnlimit FROM pg_database WHERE datname = $1', [name])).rows[0].datconnlimit).toBe(8)
  // The password the tenant was given at create still opens its database, with its rows.
  expect(await tenantRows(made!.url)).toEqual([1, 2, 3])
})

test('a database a DROP DATABASE left half-dropped (invalid) is seen as gone, and the next update makes it again', async () => {
  const name = `kiln_inv_${crypto.randomBytes(4).toString('hex')}`
  const { stack } = await c.services.create(c.actor, { name: 'half-dropped', template: template(name, 3) })
  expect(await c.settle(stack.id)).toBe('CREATE_COMPLETE')
  // What an interrupted DROP DATABASE leaves (PostgreSQL 15.4+): the database marked invalid, which only a drop accepts.
  await admin.query('UPDATE pg_database SET datconnlimit = -2 WHERE datname = $1', [name])
  const other = new pg.Client({ connectionString: target.url })
  other.on('error', () => {}) // the refusal is FATAL: the server ends the session
  await other.connect()
  await expect(other.query(`ALTER DATABASE "${name}" CONNECTION LIMIT 4`)).rejects.toThrow(/invalid database/)
  await other.end().catch(() => {})

  await c.services.check(c.actor, stack.id)
  expect(await c.settle(stack.id)).toBe('CHECK_FAILED')
  await update(stack.id, name, 4)
  expect(await c.settle(stack.id)).toBe('UPDATE_COMPLETE')
  expect((await admin.query('SELECT datconnlimit FROM pg_database WHERE datname = $1', [name])).rows).toEqual([{ datconnlimit: 4 }])
  const [row] = await dbRows(stack.id)
  const tenant = new pg.Client({ connectionString: row!.url })
  await tenant.connect()
  expect((await tenant.query('SELECT current_database() AS db')).rows[0].db).toBe(name)
  await tenant.end()
})
