/**
 * Kiln::Postgres::Database against a target server of its own (an embedded
 * cluster, as Kiln runs it, logging every statement), with real worker
 * processes: what a worker killed mid-action, an abort mid-action, or the
 * server's log must not leave behind.
 *
 * Gates, never sleeps: a test holds a lock the action's statement needs
 * (COMMENT ON DATABASE takes a lock on the database object that CREATE
 * DATABASE, on its template, and DROP DATABASE wait for), waits until the
 * server shows the statement waiting for it, and then kills the worker or
 * deletes the stack.
 */
import crypto from 'node:crypto'
import fs from 'node:fs'
import pg from 'pg'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { TestCluster } from '../helpers/cluster'
import { testDatabase, type TestDatabase } from '../helpers/db'
import { ownPostgres, type OwnPostgres } from '../helpers/own-postgres'

let db: TestDatabase
let target: OwnPostgres
let c: TestCluster
/** A superuser session on the target server. */
let admin: pg.Client

beforeAll(async () => {
  ;[db, target] = await Promise.all([testDatabase(), ownPostgres('target', { settings: { log_statement: 'all' } })])
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

const template = (name: string) =>
  JSON.stringify({
    heat_template_version: '2018-08-31',
    resources: { db: { type: 'Kiln::Postgres::Database', properties: { name } } },
    outputs: { url: { value: { get_attr: ['db', 'url'] } }, password: { value: { get_attr: ['db', 'password'] } } },
  })

const fresh = () => `kiln_tgt_${crypto.randomBytes(4).toString('hex')}`

async function serverHas(name: string): Promise<{ database: boolean; role: boolean }> {
  const { rows } = await admin.query(`SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1) AS database, EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1) AS role`, [name])
  return rows[0]
}

const records = async (name: string) => (await c.db.pool.query(`SELECT kind, state FROM outside_object WHERE key = $1 ORDER BY kind`, [name])).rows

/** A session holding the lock that `CREATE DATABASE` (on template1) or `DROP DATABASE <db>` waits for, until `open()`. */
async function gate(database: string): Promise<{ open(): Promise<void> }> {
  const g = new pg.Client({ connectionString: target.url })
  await g.connect()
  await g.query('BEGIN')
  await g.query(`COMMENT ON DATABASE "${database}" IS 'a test holds this lock'`)
  return {
    async open() {
      await g.query('ROLLBACK')
      await g.end()
    },
  }
}

/** Statements of the server starting with `prefix` (e.g. CREATE DATABASE), and whether they wait for a lock. */
async function running(prefix: string): Promise<{ waiting: boolean }[]> {
  const { rows } = await admin.query(`SELECT wait_event_type = 'Lock' AS waiting FROM pg_stat_activity WHERE query LIKE $1 AND pid <> pg_backend_pid()`, [`${prefix}%`])
  return rows
}

const waitUntil = (what: string, cond: () => Promise<boolean>) => c.waitFor(cond, 30_000, what, 100)

/** The worker holding the stack's row: killed, and its lock left to run out (2 s lease). */
async function killHolder(stackId: string): Promise<void> {
  const holder = (await c.rows(stackId)).find((r) => r.engine_id)?.engine_id
  const victim = c.workers.find((w) => w.id === holder)
  expect(victim, 'a worker of this cluster holds the row').toBeDefined()
  victim!.proc.kill('SIGKILL')
  await new Promise((r) => victim!.proc.once('exit', r))
}

test("the tenant role's password never reaches the server's log, only its SCRAM verifier", async () => {
  const name = fresh()
  const created = await c.services.create(c.actor, { name: 'pw', template: template(name) })
  expect(await c.settle(created.stack.id)).toBe('CREATE_COMPLETE')
  const row = (await c.db.pool.query(`SELECT attributes FROM resource WHERE stack_id = $1`, [created.stack.id])).rows[0]
  const password = row.attributes.password as string
  expect(password.length).toBeGreaterThan(16)
  const log = fs.readFileSync(target.logFile, 'utf8')
  expect(log.includes(`statement: CREATE ROLE "${name}"`), 'CREATE ROLE is logged').toBe(true) // statements are logged...
  expect(log.includes(password), 'the password is in the server log').toBe(false) // ... and the password is in none of them
  expect(log).toMatch(new RegExp(`statement: CREATE ROLE "${name}" WITH LOGIN .* PASSWORD 'SCRAM-SHA-256\\$4096:`))
  const asTenant = new pg.Client({ connectionString: row.attributes.url as string })
  await asTenant.connect()
  await asTenant.end()
  await c.services.delete(c.actor, created.stack.id)
  expect(await c.settle(created.stack.id)).toBe('DELETE_COMPLETE')
  expect(await serverHas(name)).toEqual({ database: false, role: false })
})

test('on a server Kiln runs, a tenant role reaches no other database, even one PUBLIC may connect to', async () => {
  const name = fresh()
  const open = `open_${crypto.randomBytes(4).toString('hex')}`
  await admin.query(`CREATE DATABASE ${open}`) // CONNECT granted to PUBLIC, as every new database has it
  try {
    const created = await c.services.create(c.actor, { name: 'hba', template: template(name) })
    expect(await c.settle(created.stack.id)).toBe('CREATE_COMPLETE')
    const url = new URL((await c.db.pool.query(`SELECT attributes->>'url' AS url FROM resource WHERE stack_id = $1`, [created.stack.id])).rows[0].url)
    expect((await admin.query(`SELECT has_database_privilege($1, $2, 'CONNECT') AS may`, [name, open])).rows[0].may).toBe(true)
    for (const other of [open, 'postgres']) {
      url.pathname = `/${other}`
      const client = new pg.Client({ connectionString: url.toString() })
      const err = (await client.connect().then(() => null, (e: { code?: string; message: string }) => e))!
      await client.end().catch(() => {})
      expect(err, other).not.toBeNull()
      expect(err.code, err.message).toBe('28000') // pg_hba.conf: tenants reach only the database of their own name
    }
    await c.services.delete(c.actor, created.stack.id)
    expect(await c.settle(created.stack.id)).toBe('DELETE_COMPLETE')
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${open}`)
  }
})

test('a worker killed during CREATE DATABASE: the retry takes over what it made, and the delete removes database and role', async () => {
  const name = fresh()
  const g = await gate('template1')
  const created = await c.services.create(c.actor, { name: 'kill-create', template: template(name) })
  await waitUntil('CREATE DATABASE to wait at the gate', async () => (await running('CREATE DATABASE')).some((r) => r.waiting))
  await killHolder(created.stack.id)
  // The server goes on with the statement of the dead worker's connection: the database is made.
  await g.open()
  await waitUntil('the orphaned CREATE DATABASE to end', async () => (await running('CREATE DATABASE')).length === 0)
  expect(await serverHas(name)).toEqual({ database: true, role: true })

  c.spawnWorker()
  expect(await c.settle(created.stack.id)).toBe('CREATE_COMPLETE')
  expect(await records(name)).toEqual([{ kind: 'pg_database', state: 'present' }, { kind: 'pg_role', state: 'present' }])
  const url = (await c.db.pool.query(`SELECT attributes->>'url' AS url FROM resource WHERE stack_id = $1 AND action = 'CREATE' AND status = 'COMPLETE'`, [created.stack.id])).rows[0].url
  const asTenant = new pg.Client({ connectionString: url })
  await asTenant.connect()
  await asTenant.end()

  await c.services.delete(c.actor, created.stack.id)
  expect(await c.settle(created.stack.id)).toBe('DELETE_COMPLETE')
  expect(await serverHas(name)).toEqual({ database: false, role: false })
  expect(await records(name)).toEqual([])
})

test('a stack deleted during CREATE DATABASE leaves neither database nor role, even when the waiting statement could finish later', async () => {
  const name = fresh()
  const g = await gate('template1')
  const created = await c.services.create(c.actor, { name: 'delete-create', template: template(name) })
  await waitUntil('CREATE DATABASE to wait at the gate', async () => (await running('CREATE DATABASE')).some((r) => r.waiting))
  await c.services.delete(c.actor, created.stack.id)
  expect(await c.settle(created.stack.id)).toBe('DELETE_COMPLETE')
  // Whatever the aborted create left waiting on the server is over before the delete dropped anything.
  expect(await running('CREATE DATABASE')).toEqual([])
  await g.open()
  expect(await serverHas(name)).toEqual({ database: false, role: false })
  expect(await records(name)).toEqual([])
})

test('a worker killed during DROP DATABASE: the retried delete still drops the role', async () => {
  const name = fresh()
  const created = await c.services.create(c.actor, { name: 'kill-drop', template: template(name) })
  expect(await c.settle(created.stack.id)).toBe('CREATE_COMPLETE')
  const g = await gate(name)
  await c.services.delete(c.actor, created.stack.id)
  await waitUntil('DROP DATABASE to wait at the gate', async () => (await running('DROP DATABASE')).some((r) => r.waiting))
  await killHolder(created.stack.id)
  await g.open()
  await waitUntil('the orphaned DROP DATABASE to end', async () => (await running('DROP DATABASE')).length === 0)
  expect(await serverHas(name)).toEqual({ database: false, role: true })

  c.spawnWorker()
  expect(await c.settle(created.stack.id)).toBe('DELETE_COMPLETE')
  expect(await serverHas(name)).toEqual({ database: false, role: false })
  expect(await records(name)).toEqual([])
})
