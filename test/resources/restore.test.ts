/**
 * Restores from one snapshot (from_snapshot), with worker processes over the
 * real API. A restore hands the copy's objects to the new role, which changes
 * the snapshot's own catalog row; two restores doing it at once fail ("tuple
 * concurrently updated"), and a restore that failed after CREATE DATABASE
 * left a database PUBLIC could connect to.
 *
 * The test holds that catalog row itself (a transaction that updates it and
 * waits), so that the restores meet exactly there, however slow the machine:
 *   - five restores of one snapshot in one stack, the first held there (the
 *     others queue behind it: a project's creates take turns, and restores of
 *     one snapshot hold its restore lock), then let go: they run one at a time
 *     and all succeed;
 *   - a restore whose hand-over fails (the held update committed under it),
 *     after its CREATE DATABASE: no database is left that PUBLIC can connect
 *     to, and the next attempt restores it in full.
 */
import pg from 'pg'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { useKilnEnv } from '../helpers/stack-env'
import { serverNames } from '../helpers/target-cleanup'

const { db, cluster: c, api } = useKilnEnv({ cluster: { workers: 2 } })
let admin: pg.Client

beforeAll(async () => {
  admin = new pg.Client({ connectionString: db.urlFor('postgres') })
  await admin.connect()
}, 120_000)

afterAll(async () => {
  if (admin) await names.drop(admin)
  await admin?.end()
})

const V = '2018-08-31'
const names = serverNames('kiln_rst')
// One connection each: the project's connection budget (KILN_PROJECT_CONNECTION_LIMIT) holds every database of the file.
const database = (props: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ type: 'Kiln::Postgres::Database', properties: { connection_limit: 1, ...props }, ...extra })

async function create(name: string, resources: Record<string, unknown>): Promise<{ id: string; settled: Promise<string> }> {
  const r = await api.call('POST', '/api/stacks', { body: { name, template: { heat_template_version: V, resources } } })
  expect(r.status, r.text).toBe(201)
  return { id: r.body.stack.id, settled: c.settle(r.body.stack.id, 120_000) }
}

const urlOf = async (stackId: string, resource: string) =>
  (await c.db.pool.query(`SELECT attributes->>'url' AS url FROM resource WHERE stack_id = $1 AND name = $2 AND replaced_by IS NULL ORDER BY id DESC LIMIT 1`, [stackId, resource])).rows[0].url as string

async function rowsAs(url: string): Promise<number[]> {
  const t = new pg.Client({ connectionString: url })
  await t.connect()
  try {
    return (await t.query('SELECT n FROM kept ORDER BY n')).rows.map((r) => r.n as number)
  } finally {
    await t.end()
  }
}

/** A snapshot holding rows 1 and 2: a database made, filled, and deleted with deletion_policy Snapshot. */
async function snapshot(): Promise<string> {
  const made = await create(`src-${names.fresh()}`, { db: database({ name: names.fresh() }, { deletion_policy: 'Snapshot' }) })
  expect(await made.settled).toBe('CREATE_COMPLETE')
  const t = new pg.Client({ connectionString: await urlOf(made.id, 'db') })
  await t.connect()
  await t.query('CREATE TABLE kept (n int); INSERT INTO kept VALUES (1), (2)')
  await t.end()
  expect((await api.call('DELETE', `/api/stacks/${made.id}`)).status).toBe(202)
  expect(await c.settle(made.id)).toBe('DELETE_COMPLETE')
  return (await api.call('GET', `/api/stacks/${made.id}/snapshots`)).body.snapshots[0].name as string
}

/**
 * The snapshot's catalog row, updated (to the values it has) in a transaction
 * left open: whatever else changes that row waits for it, and fails if it
 * commits.
 */
async function holdRow(snap: string): Promise<pg.Client> {
  const holder = new pg.Client({ connectionString: db.urlFor('postgres') })
  await holder.connect()
  const { rows } = await holder.query('SELECT datconnlimit FROM pg_database WHERE datname = $1', [snap])
  await holder.query('BEGIN')
  await holder.query(`ALTER DATABASE ${snap} CONNECTION LIMIT ${Number(rows[0].datconnlimit)}`)
  return holder
}

/** Resolves once `n` sessions acting on databases (the restores) wait for a lock on the server. */
function restoresWaiting(n: number): Promise<void> {
  return c.waitFor(
    async () => {
      const { rows } = await admin.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name LIKE 'kiln-pg-%' AND application_name <> 'kiln-pg-observe'`,
      )
      return rows[0].n >= n
    },
    120_000,
    `${n} restores to wait for a lock`,
  )
}

const publicMayConnect = async (dbs: string[]) =>
  (await admin.query(`SELECT datname FROM pg_database WHERE datname = ANY($1) AND has_database_privilege('public', oid, 'CONNECT')`, [dbs])).rows.map((r) => r.datname as string)

test('five restores of one snapshot in one stack, all arriving at once, run one at a time and all succeed', async () => {
  const snap = await snapshot()
  const targets = Array.from({ length: 5 }, () => names.fresh())
  const holder = await holdRow(snap)
  const stack = await create('five', Object.fromEntries(targets.map((n, i) => [`r${i}`, database({ name: n, from_snapshot: snap })])))
  await restoresWaiting(1)
  await holder.query('ROLLBACK')
  await holder.end()

  expect(await stack.settled).toBe('CREATE_COMPLETE')
  for (let i = 0; i < targets.length; i++) expect(await rowsAs(await urlOf(stack.id, `r${i}`))).toEqual([1, 2])
  expect(await publicMayConnect(targets)).toEqual([])
  // The snapshot is as it was: its own role owns it, for the next restore.
  expect((await admin.query('SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = $1', [snap])).rows).toEqual([{ owner: snap }])
})

test('a restore that fails after CREATE DATABASE leaves no database PUBLIC can connect to, and the next attempt restores it', async () => {
  const snap = await snapshot()
  const target = names.fresh()
  const holder = await holdRow(snap)
  const stack = await create('fails', { r: database({ name: target, from_snapshot: snap }) })
  await restoresWaiting(1)
  // Committed under the waiting hand-over: it fails, after the database was made.
  await holder.query('COMMIT')
  await holder.end()

  expect(await stack.settled).toBe('CREATE_FAILED')
  expect((await c.rows(stack.id))[0]!.status_reason).toContain('tuple concurrently updated')
  expect(await publicMayConnect([target])).toEqual([])
  // What it made is gone, so the next attempt copies the snapshot again (rows and their owner with it).
  expect((await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [target])).rowCount).toBe(0)

  const again = await api.call('PUT', `/api/stacks/${stack.id}`, { body: { template: { heat_template_version: V, resources: { r: database({ name: target, from_snapshot: snap }) } }, force: true } })
  expect(again.status, again.text).toBe(202)
  expect(await c.settle(stack.id, 120_000)).toBe('UPDATE_COMPLETE')
  expect(await rowsAs(await urlOf(stack.id, 'r'))).toEqual([1, 2])
  expect(await publicMayConnect([target])).toEqual([])
})
