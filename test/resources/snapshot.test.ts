/**
 * deletion_policy: Snapshot, with worker processes over the real API: a
 * Kiln::Postgres::Database is copied (CREATE DATABASE … TEMPLATE, on the
 * same server) before it is dropped, the copy is recorded, listed on the
 * stack (also once the stack is deleted) and restorable into a new database
 * of the same project (from_snapshot), with its rows. No tenant reaches the
 * copy, another project cannot restore it, and a type that cannot snapshot
 * is refused the policy when the template is checked.
 */
import crypto from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { useKilnEnv } from '../helpers/stack-env'
import { serverNames } from '../helpers/target-cleanup'

const { db, cluster: c, api } = useKilnEnv({ cluster: { workers: 1 } })
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
const names = serverNames('kiln_snp')
const fresh = () => names.fresh()
const database = (props: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ heat_template_version: V, resources: { db: { type: 'Kiln::Postgres::Database', properties: props, ...extra } } })

async function create(name: string, template: unknown, token = api.a.token): Promise<{ id: string; state: string }> {
  const r = await api.call('POST', '/api/stacks', { body: { name, template }, token })
  expect(r.status, r.text).toBe(201)
  return { id: r.body.stack.id, state: await c.settle(r.body.stack.id) }
}

const urlOf = async (stackId: string) => (await c.db.pool.query(`SELECT attributes->>'url' AS url FROM resource WHERE stack_id = $1 AND name = 'db'`, [stackId])).rows[0].url as string

async function asTenant<T>(url: string, fn: (t: pg.Client) => Promise<T>): Promise<T> {
  const t = new pg.Client({ connectionString: url })
  await t.connect()
  try {
    return await fn(t)
  } finally {
    await t.end()
  }
}

test('a database is copied before it is dropped; the copy is listed on the stack and restored, with its rows, into a new database', async () => {
  const name = fresh()
  const { id, state } = await create('snapped', database({ name }, { deletion_policy: 'Snapshot' }))
  expect(state).toBe('CREATE_COMPLETE')
  await asTenant(await urlOf(id), (t) => t.query('CREATE TABLE kept (n int); INSERT INTO kept VALUES (1), (2)'))

  expect((await api.call('DELETE', `/api/stacks/${id}`)).status).toBe(202)
  expect(await c.settle(id)).toBe('DELETE_COMPLETE')
  const listed = await api.call('GET', `/api/stacks/${id}/snapshots`)
  expect(listed.status, listed.text).toBe(200)
  expect(listed.body.snapshots).toEqual([{ name: expect.stringMatching(new RegExp(`^${name}_snap_[0-9a-f]{12}$`)), of: name, resource: 'db', state: 'present', takenAt: expect.any(String) }])
  const snap = listed.body.snapshots[0].name as string
  const reasons = (await c.db.pool.query(`SELECT reason FROM event WHERE stack_id = $1 AND resource_name = 'db' AND action = 'DELETE' AND status = 'COMPLETE'`, [id])).rows.map((r) => r.reason)
  expect(reasons).toEqual([`state changed; snapshot ${snap} kept`])

  // The database and its role are gone; the copy is owned by a role that cannot log in.
  const server = async (n: string) => (await admin.query(`SELECT (SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1) AS owner, (SELECT rolcanlogin FROM pg_roles WHERE rolname = $1) AS login`, [n])).rows[0]
  expect(await server(name)).toEqual({ owner: null, login: null })
  expect(await server(snap)).toEqual({ owner: snap, login: false })

  const restored = fresh()
  const back = await create('restored', database({ name: restored, from_snapshot: snap }))
  expect(back.state).toBe('CREATE_COMPLETE')
  expect(await asTenant(await urlOf(back.id), async (t) => (await t.query('SELECT n FROM kept ORDER BY n')).rows.map((r) => r.n))).toEqual([1, 2])
  // The snapshot is left as it was, for another restore.
  expect(await server(snap)).toEqual({ owner: snap, login: false })
  expect((await api.call('GET', `/api/stacks/${id}/snapshots`)).body.snapshots.map((s: { name: string }) => s.name)).toEqual([snap])

  // Not another project's to restore, and not to be adopted as a database.
  const theirs = await create('not-theirs', database({ name: fresh(), from_snapshot: snap }), api.b.token)
  expect(theirs.state).toBe('CREATE_FAILED')
  expect((await c.rows(theirs.id))[0]!.status_reason).toContain(`from_snapshot: ${snap} is not a snapshot of this project`)
  const adopt = await api.call('POST', '/api/import/preview', { body: { name: 'grab', template: database({ name: snap }, { external_id: snap }) } })
  expect(adopt.body.items[0]).toMatchObject({ outcome: 'refused', reason: `external_id ${snap}: it is a snapshot of ${name}; restore it into a new database with from_snapshot` })
})

test('deletion_policy Snapshot is refused for a type that cannot take one', async () => {
  for (const [type, props] of [['Kiln::File', { path: 'x.txt' }], ['OS::Heat::TestResource', {}]] as const) {
    const r = await api.call('POST', '/api/stacks', { body: { name: `no-snap-${crypto.randomBytes(3).toString('hex')}`, template: { heat_template_version: V, resources: { r: { type, properties: props, deletion_policy: 'Snapshot' } } } } })
    expect(r.status, r.text).toBe(400)
    expect(r.body.error.issues).toEqual([expect.objectContaining({ path: 'resources.r.deletion_policy', message: `${type} cannot take a snapshot: deletion_policy Snapshot is refused for it (use Delete or Retain)` })])
  }
})
