/**
 * Storage quotas of Kiln::Postgres::Database per project, and snapshots
 * listed and deleted, over the real API with worker processes and two
 * projects, on the shared test server (the default target):
 *
 *   - a project's databases and snapshots are counted (KILN_PROJECT_MAX_DATABASES,
 *     KILN_PROJECT_MAX_SNAPSHOTS): a create past the count fails, and so does a
 *     delete whose snapshot would be one too many (the database is kept);
 *     another project's count is its own;
 *   - the project lists its snapshots and deletes one (REST and CLI), which
 *     makes room; another project can neither list nor delete them (404);
 *   - the bytes they take (KILN_PROJECT_DATABASE_QUOTA_BYTES): a tenant who
 *     filled its database is refused its next one;
 *   - a snapshot a restore is copying is not deleted (409), and is once the
 *     restore is done (the copy waits at a gate: a lock on the snapshot).
 */
import { execFile } from 'node:child_process'
import crypto from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { childEnv } from '../../lib/env'
import { startApiServer, type ApiServer } from '../helpers/api-server'
import { TestCluster } from '../helpers/cluster'
import { testDatabase, type TestDatabase } from '../helpers/db'
import { serverNames } from '../helpers/target-cleanup'

let db: TestDatabase
let c: TestCluster
let api: ApiServer
let admin: pg.Client
/** The size of an empty database on this server (a copy of template1). */
let empty: number
let quotaBytes: number

beforeAll(async () => {
  db = await testDatabase()
  admin = new pg.Client({ connectionString: db.urlFor('postgres') })
  await admin.connect()
  empty = Number((await admin.query(`SELECT pg_database_size('template1') AS size`)).rows[0].size)
  // Room for three and a half empty databases: the counts bind first, until a tenant fills one.
  quotaBytes = Math.floor(3.5 * empty)
  const env = { KILN_PROJECT_MAX_DATABASES: '2', KILN_PROJECT_MAX_SNAPSHOTS: '1', KILN_PROJECT_DATABASE_QUOTA_BYTES: String(quotaBytes) }
  c = await TestCluster.start(db.url, { workers: 2, env })
  api = await startApiServer(c)
}, 120_000)

afterAll(async () => {
  if (admin) await names.drop(admin)
  await admin?.end()
  await api?.close()
  await c?.stop()
  await db?.drop()
})

const names = serverNames('kiln_quo')
const V = '2018-08-31'
const database = (props: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  heat_template_version: V,
  resources: { db: { type: 'Kiln::Postgres::Database', properties: props, ...extra } },
  outputs: { url: { value: { get_attr: ['db', 'url'] } } },
})

type Who = 'a' | 'b'
const token = (who: Who) => (who === 'a' ? api.a.token : api.b.token)

async function create(who: Who, template: unknown): Promise<{ id: string; state: string; reason: string }> {
  const r = await api.call('POST', '/api/stacks', { token: token(who), body: { name: `${who}-${crypto.randomBytes(4).toString('hex')}`, template } })
  expect(r.status, r.text).toBe(201)
  const state = await c.settle(r.body.stack.id)
  return { id: r.body.stack.id, state, reason: (await c.stack(r.body.stack.id)).statusReason }
}

async function remove(who: Who, id: string): Promise<{ state: string; reason: string }> {
  expect((await api.call('DELETE', `/api/stacks/${id}`, { token: token(who) })).status).toBe(202)
  const state = await c.settle(id)
  return { state, reason: (await c.stack(id)).statusReason }
}

const onServer = async (name: string) =>
  (await admin.query(`SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1) AS database, EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1) AS role`, [name])).rows[0] as { database: boolean; role: boolean }

const urlOf = async (stackId: string) => (await c.db.pool.query(`SELECT attributes->>'url' AS url FROM resource WHERE stack_id = $1 AND name = 'db'`, [stackId])).rows[0].url as string

function kiln(args: string[], who: Who): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/kiln.mjs', ...args], { env: childEnv({ KILN_URL: api.url, KILN_TOKEN: token(who) }), timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr })
    })
  })
}

test('a snapshot a restore is copying is not deleted (409); once the restore is done, it is', async () => {
  const source = await create('a', database({ name: names.fresh() }, { deletion_policy: 'Snapshot' }))
  expect(source.state).toBe('CREATE_COMPLETE')
  expect((await remove('a', source.id)).state).toBe('DELETE_COMPLETE')
  const snapshots = (await api.call('GET', `/api/stacks/${source.id}/snapshots`)).body.snapshots as { name: string }[]
  expect(snapshots).toHaveLength(1)
  const snap = snapshots[0]!.name
  // A gate: a lock on the snapshot's database, which its copy (CREATE DATABASE … TEMPLATE) waits for.
  const gate = new pg.Client({ connectionString: db.urlFor('postgres') })
  await gate.connect()
  await gate.query('BEGIN')
  await gate.query(`COMMENT ON DATABASE "${snap}" IS 'a test holds this lock'`)
  const restored = names.fresh()
  const r = await api.call('POST', '/api/stacks', { body: { name: 'restore', template: database({ name: restored, from_snapshot: snap }) } })
  const restore = { id: r.body?.stack?.id as string }
  try {
    expect(r.status, r.text).toBe(201)
    const copying = async () => (await admin.query(`SELECT 1 FROM pg_stat_activity WHERE query LIKE $1 AND wait_event_type = 'Lock'`, [`CREATE DATABASE "${restored}"%`])).rowCount === 1
    await c.waitFor(copying, 30_000, 'the restore to wait at the gate', 100)
    const busy = await api.call('DELETE', `/api/stacks/${source.id}/snapshots/${snap}`)
    expect(busy.status, busy.text).toBe(409)
    expect(busy.body.error.message).toBe(`the snapshot ${snap} is being restored into a database or taken right now; try again once that is done`)
  } finally {
    await gate.query('ROLLBACK')
    await gate.end()
  }
  expect(await c.settle(restore.id)).toBe('CREATE_COMPLETE')
  expect((await api.call('DELETE', `/api/stacks/${source.id}/snapshots/${snap}`)).status).toBe(204)
  expect(await onServer(snap)).toEqual({ database: false, role: false })
  // The restored database is a copy of its own: its tenant still reads it.
  const t = new pg.Client({ connectionString: await urlOf(restore.id) })
  await t.connect()
  await t.end()
  expect((await remove('a', restore.id)).state).toBe('DELETE_COMPLETE')
})

test("counts: a project's databases and snapshots stop at their quotas; snapshots are listed and deleted by their project only, which makes room", async () => {
  const [n1, n2, n3] = [names.fresh(), names.fresh(), names.fresh()]
  const a1 = await create('a', database({ name: n1 }, { deletion_policy: 'Snapshot' }))
  const a2 = await create('a', database({ name: n2 }, { deletion_policy: 'Snapshot' }))
  expect([a1.state, a2.state]).toEqual(['CREATE_COMPLETE', 'CREATE_COMPLETE'])
  const a3 = await create('a', database({ name: n3 }))
  expect(a3.state).toBe('CREATE_FAILED')
  expect(a3.reason).toContain(`the project has 2 databases on the target server, its quota (KILN_PROJECT_MAX_DATABASES is 2): delete one before making ${n3}`)
  expect(await onServer(n3)).toEqual({ database: false, role: false })
  // Another project's count is its own.
  const b1 = await create('b', database({ name: names.fresh() }))
  expect(b1.state).toBe('CREATE_COMPLETE')

  // A snapshot is kept; a second would be one too many: that delete fails and keeps its database.
  expect((await remove('a', a2.id)).state).toBe('DELETE_COMPLETE')
  const listed = await api.call('GET', '/api/snapshots', { token: api.a.token })
  expect(listed.status, listed.text).toBe(200)
  expect(listed.body.snapshots).toEqual([{ name: expect.stringMatching(new RegExp(`^${n2}_snap_`)), of: n2, stackId: a2.id, stackName: expect.any(String), resource: 'db', state: 'present', takenAt: expect.any(String) }])
  const s1 = listed.body.snapshots[0].name as string
  const refused = await remove('a', a1.id)
  expect(refused.state).toBe('DELETE_FAILED')
  expect(refused.reason).toContain(`the project keeps 1 snapshots, its quota (KILN_PROJECT_MAX_SNAPSHOTS is 1), so no snapshot of ${n1} was taken and nothing was deleted`)
  expect(await onServer(n1)).toEqual({ database: true, role: true })

  // Project B sees none of A's snapshots and can delete none of them, by any stack.
  expect((await api.call('GET', '/api/snapshots', { token: api.b.token })).body.snapshots).toEqual([])
  expect((await api.call('GET', `/api/stacks/${a2.id}/snapshots`, { token: api.b.token })).status).toBe(404)
  for (const stack of [a2.id, a1.id]) expect((await api.call('DELETE', `/api/stacks/${stack}/snapshots/${s1}`, { token: api.b.token })).status).toBe(404)
  expect((await api.call('DELETE', `/api/stacks/${b1.id}/snapshots/${s1}`, { token: api.b.token })).status).toBe(404)
  expect((await kiln(['snapshot', 'delete', a2.id, s1], 'b')).code).not.toBe(0)
  expect(await onServer(s1)).toEqual({ database: true, role: true })
  // A's own other stack did not keep it either; a name that is no snapshot name names none.
  expect((await api.call('DELETE', `/api/stacks/${a1.id}/snapshots/${s1}`)).status).toBe(404)
  expect((await api.call('DELETE', `/api/stacks/${a2.id}/snapshots/Bad-Name`)).status).toBe(404)

  // A lists it with the CLI and deletes it: gone from the server and the lists; the delete that was refused now keeps its snapshot.
  const cliList = await kiln(['snapshot', 'list', '--json'], 'a')
  expect(cliList.code, cliList.stderr).toBe(0)
  expect(JSON.parse(cliList.stdout).map((s: { name: string }) => s.name)).toEqual([s1])
  const deleted = await kiln(['snapshot', 'delete', a2.id, s1], 'a')
  expect(deleted.code, deleted.stderr).toBe(0)
  expect(deleted.stdout).toContain(`snapshot ${s1} deleted`)
  expect(await onServer(s1)).toEqual({ database: false, role: false })
  expect((await api.call('GET', `/api/stacks/${a2.id}/snapshots`)).body.snapshots).toEqual([])
  expect((await api.call('DELETE', `/api/stacks/${a2.id}/snapshots/${s1}`)).status).toBe(404)

  expect((await remove('a', a1.id)).state).toBe('DELETE_COMPLETE')
  const [s2] = (await api.call('GET', `/api/stacks/${a1.id}/snapshots`)).body.snapshots as { name: string }[]
  expect(s2?.name).toMatch(new RegExp(`^${n1}_snap_`))
  await remove('a', a3.id)
  await remove('b', b1.id)
})

test('bytes: a tenant that filled its database is refused its next one, naming the quota; another project is not', async () => {
  const b = await create('b', database({ name: names.fresh() }))
  expect(b.state).toBe('CREATE_COMPLETE')
  // About two empty databases' worth of rows that do not compress (md5 text, ~100 bytes a row).
  const rows = Math.ceil((2.2 * empty) / 100)
  const t = new pg.Client({ connectionString: await urlOf(b.id) })
  await t.connect()
  try {
    await t.query(`CREATE TABLE fill AS SELECT g, md5(g::text) || md5((g * 7)::text) AS s FROM generate_series(1, ${rows}) g`)
    expect(Number((await t.query('SELECT pg_database_size(current_database()) AS size')).rows[0].size)).toBeGreaterThan(quotaBytes - empty)
  } finally {
    await t.end()
  }
  const next = await create('b', database({ name: names.fresh() }))
  expect(next.state).toBe('CREATE_FAILED')
  expect(next.reason).toMatch(new RegExp(`the project's databases and snapshots take \\d+ bytes on the target server; \\w+, an empty database \\(\\d+ bytes\\), would take them past its quota of ${quotaBytes} bytes \\(KILN_PROJECT_DATABASE_QUOTA_BYTES\\)`))
  const a = await create('a', database({ name: names.fresh() }))
  expect(a.state).toBe('CREATE_COMPLETE')
  await remove('a', a.id)
})
