/**
 * Import and adopt (Heat's external_id) over the real API with worker
 * processes: an existing database is previewed (as it is now, and how it
 * differs from the template), adopted without being created or changed,
 * refused an update while external_id is set (Heat's rule, a 400 naming it),
 * then managed and updated in place once external_id is removed, with its
 * rows. A file of the project's workspace is adopted and left in place when
 * the stack is deleted. Tenancy holds: nothing another project's, another
 * live stack's or nobody's (an unrecorded database) is adopted.
 */
import { execFile } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { childEnv } from '../../lib/env'
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

const names = serverNames('kiln_imp')
const fresh = () => names.fresh()
const V = '2018-08-31'
const dbTemplate = (props: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ heat_template_version: V, resources: { db: { type: 'Kiln::Postgres::Database', properties: props, ...extra } } })

async function created(name: string, template: unknown, token = api.a.token): Promise<string> {
  const r = await api.call('POST', '/api/stacks', { body: { name, template }, token })
  expect(r.status, r.text).toBe(201)
  expect(await c.settle(r.body.stack.id)).toBe('CREATE_COMPLETE')
  return r.body.stack.id
}

async function deleted(id: string, token = api.a.token) {
  expect((await api.call('DELETE', `/api/stacks/${id}`, { token })).status).toBe(202)
  expect(await c.settle(id)).toBe('DELETE_COMPLETE')
}

/** A database Kiln made and kept (deletion_policy Retain) after its stack was deleted, holding rows. */
async function retainedDatabase(token = api.a.token): Promise<{ name: string; url: string }> {
  const name = fresh()
  const id = await created(`keep-${name}`, dbTemplate({ name, connection_limit: 3 }, { deletion_policy: 'Retain' }), token)
  const url = (await c.db.pool.query(`SELECT attributes->>'url' AS url FROM resource WHERE stack_id = $1`, [id])).rows[0].url as string
  const tenant = new pg.Client({ connectionString: url })
  await tenant.connect()
  await tenant.query('CREATE TABLE kept (n int); INSERT INTO kept VALUES (7), (8)')
  await tenant.end()
  await deleted(id, token)
  expect((await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount).toBe(1)
  return { name, url }
}

const owners = async (key: string) => (await c.db.pool.query(`SELECT kind, stack_id, resource_name FROM outside_object WHERE key = $1 ORDER BY kind`, [key])).rows

describe('a database', () => {
  test('previewed, adopted as it is, refused an update while external_id is set, then updated in place once it is removed, with its rows', async () => {
    const { name } = await retainedDatabase()
    const before = await owners(name)
    const template = dbTemplate({ name }, { external_id: name })

    const preview = await api.call('POST', '/api/import/preview', { body: { name: 'adopter', template } })
    expect(preview.status, preview.text).toBe(200)
    expect(preview.body.stack).toEqual({ name: 'adopter', id: null, exists: false })
    expect(preview.body.items).toEqual([
      {
        name: 'db',
        type: 'Kiln::Postgres::Database',
        externalId: name,
        outcome: 'adopt',
        properties: { name, connection_limit: 3 },
        attributes: { database: name, role: name, password: null, url: null },
        differences: [{ property: 'connection_limit', template: -1, seen: 3 }],
      },
    ])
    // A preview writes nothing.
    expect(await owners(name)).toEqual(before)
    expect((await api.call('GET', '/api/stacks/adopter')).status).toBe(404)

    const imported = await api.call('POST', '/api/import', { body: { name: 'adopter', template } })
    expect(imported.status, imported.text).toBe(201)
    const id = imported.body.stack.id as string
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    const [row] = await c.rows(id)
    expect(row).toMatchObject({ name: 'db', action: 'CREATE', status: 'COMPLETE', physical_id: name, properties: { name, connection_limit: 3 } })
    expect(await owners(name)).toEqual([
      { kind: 'pg_database', stack_id: id, resource_name: 'db' },
      { kind: 'pg_role', stack_id: id, resource_name: 'db' },
    ])
    const again = await api.call('POST', '/api/import/preview', { body: { name: 'adopter', template } })
    expect(again.body.items[0]).toMatchObject({ outcome: 'adopted' })

    // Heat's rule: not updated while external_id is set, and external_id is not changed.
    const update = await api.call('PUT', `/api/stacks/${id}`, { body: { template: dbTemplate({ name, connection_limit: 5 }, { external_id: name }) } })
    expect(update.status).toBe(400)
    expect(update.body.error.issues).toEqual([expect.objectContaining({ path: 'resources.db.external_id', message: expect.stringContaining('was adopted with external_id') })])
    const changed = await api.call('PUT', `/api/stacks/${id}`, { body: { template: dbTemplate({ name }, { external_id: fresh() }) } })
    expect(changed.status).toBe(400)
    expect(changed.text).toContain('cannot be changed')
    // The same template again is no change: nothing starts, nothing happens to the database.
    const same = await api.call('PUT', `/api/stacks/${id}`, { body: { template } })
    expect(same.status, same.text).toBe(200)
    expect(same.body.noChanges).toBe(true)

    // Without external_id, Kiln manages it: updated in place (same row), with a password of its own now.
    const managed = await api.call('PUT', `/api/stacks/${id}`, { body: { template: dbTemplate({ name, connection_limit: 5 }) } })
    expect(managed.status, managed.text).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    const rows = await c.db.pool.query(`SELECT id, action, status, deletion_policy, attributes->>'url' AS url FROM resource WHERE stack_id = $1`, [id])
    expect(rows.rows).toEqual([{ id: Number(row!.id), action: 'UPDATE', status: 'COMPLETE', deletion_policy: 'Delete', url: expect.stringContaining(name) }])
    expect((await admin.query('SELECT datconnlimit FROM pg_database WHERE datname = $1', [name])).rows[0].datconnlimit).toBe(5)
    const tenant = new pg.Client({ connectionString: rows.rows[0].url })
    await tenant.connect()
    expect((await tenant.query('SELECT n FROM kept ORDER BY n')).rows.map((r) => r.n)).toEqual([7, 8])
    await tenant.end()

    // Managed, it goes with its stack.
    await deleted(id)
    expect((await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount).toBe(0)
    expect(await owners(name)).toEqual([])
  })

  test('nothing that is not the project’s to take: another project’s, a live stack’s, an unrecorded one; each refused in the preview and by the import', async () => {
    const theirs = await retainedDatabase(api.b.token)
    const live = fresh()
    const liveStack = await created('live-owner', dbTemplate({ name: live }))
    const unrecorded = fresh()
    await admin.query(`CREATE DATABASE ${unrecorded}`)
    try {
      const template = {
        heat_template_version: V,
        resources: Object.fromEntries(
          [theirs.name, live, unrecorded, fresh()].map((n, i) => [`db${i}`, { type: 'Kiln::Postgres::Database', properties: { name: n }, external_id: n }]),
        ),
      }
      const preview = await api.call('POST', '/api/import/preview', { body: { name: 'grabber', template } })
      expect(preview.status, preview.text).toBe(200)
      const reasons = Object.fromEntries((preview.body.items as { name: string; outcome: string; reason: string }[]).map((i) => [i.name, `${i.outcome}: ${i.reason}`]))
      // Another project's, nobody's and nothing are one answer: a tenant learns nothing of the others (test/api/tenant-names.test.ts).
      const notFound = (n: string) => `refused: external_id ${n}: not found: there is no database of that name that this project can adopt (only one Kiln made for this project and kept, by deletion_policy: Retain or an earlier adoption, can be)`
      expect(reasons).toEqual({
        db0: notFound(theirs.name),
        db1: `refused: database ${live} belongs to resource db of stack ${liveStack}`,
        db2: notFound(unrecorded),
        db3: notFound(template.resources.db3!.external_id),
      })
      const imported = await api.call('POST', '/api/import', { body: { name: 'grabber', template } })
      expect(imported.status).toBe(201)
      expect(await c.settle(imported.body.stack.id)).toBe('CREATE_FAILED')
      // Nothing changed hands, nothing was dropped.
      expect((await owners(theirs.name)).map((o) => o.resource_name)).toEqual(['db', 'db'])
      expect((await owners(live)).map((o) => o.stack_id)).toEqual([liveStack, liveStack])
      expect(await owners(unrecorded)).toEqual([])
      await deleted(imported.body.stack.id)
      expect((await admin.query('SELECT datname FROM pg_database WHERE datname = ANY($1) ORDER BY datname', [[theirs.name, live, unrecorded]])).rows.map((r) => r.datname)).toEqual([theirs.name, live, unrecorded].sort())
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${unrecorded}`)
    }
  })
})

describe('a file', () => {
  test('of the project’s workspace is adopted as it is, and left in place when its stack is deleted', async () => {
    const file = path.join(c.projectWorkspace(api.a.projectId), 'adopted/notes.txt')
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, 'written by hand\n')
    fs.chmodSync(file, 0o640)
    const template = { heat_template_version: V, resources: { notes: { type: 'Kiln::File', properties: { path: 'adopted/notes.txt' }, external_id: 'adopted/notes.txt' } } }
    const preview = await api.call('POST', '/api/import/preview', { body: { name: 'notes', template } })
    expect(preview.body.items[0]).toMatchObject({
      outcome: 'adopt',
      properties: { path: 'adopted/notes.txt', content: 'written by hand\n', mode: '0640' },
      differences: [
        { property: 'content', template: '', seen: 'written by hand\n' },
        { property: 'mode', template: '0644', seen: '0640' },
      ],
    })
    const imported = await api.call('POST', '/api/import', { body: { name: 'notes', template } })
    const id = imported.body.stack.id as string
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    expect((await c.rows(id))[0]!.properties).toEqual({ path: 'adopted/notes.txt', content: 'written by hand\n', mode: '0640' })

    // Another stack cannot take it while this one holds it.
    const grab = await api.call('POST', '/api/import/preview', { body: { name: 'grab-notes', template } })
    expect(grab.body.items[0]).toMatchObject({ outcome: 'refused', reason: `adopted/notes.txt belongs to resource notes of stack ${id}` })

    await deleted(id)
    expect(fs.readFileSync(file, 'utf8')).toBe('written by hand\n')
  })
})

describe('refused before anything starts', () => {
  test('external_id on a type with nothing outside Kiln, before HOT 2016-10-14, or depending on a resource; an import with no external_id', async () => {
    const bad = async (template: unknown, path: string, text: string) => {
      const r = await api.call('POST', '/api/stacks', { body: { name: `bad-${crypto.randomBytes(3).toString('hex')}`, template } })
      expect(r.status, r.text).toBe(400)
      expect(r.body.error.issues.map((i: { path: string }) => i.path)).toContain(path)
      expect(r.text).toContain(text)
    }
    await bad({ heat_template_version: V, resources: { t: { type: 'OS::Heat::TestResource', external_id: 'x' } } }, 'resources.t.external_id', 'OS::Heat::TestResource cannot adopt')
    await bad({ heat_template_version: '2015-10-15', resources: { f: { type: 'Kiln::File', properties: { path: 'a' }, external_id: 'a' } } }, 'resources.f.external_id', 'needs heat_template_version 2016-10-14')
    await bad(
      { heat_template_version: V, resources: { v: { type: 'OS::Heat::Value', properties: { value: 'a' } }, f: { type: 'Kiln::File', properties: { path: 'a' }, external_id: { get_attr: ['v', 'value'] } } } },
      'resources.f.external_id',
      'cannot depend on another resource',
    )
    const none = await api.call('POST', '/api/import/preview', { body: { name: 'nothing', template: { heat_template_version: V, resources: { v: { type: 'OS::Heat::Value', properties: { value: 1 } } } } } })
    expect(none.status).toBe(400)
    expect(none.text).toContain('no resource has external_id')
  })

  test('kiln stack import --preview prints what would be adopted', async () => {
    const { name } = await retainedDatabase()
    const file = path.join(c.workspace, 'import.json')
    fs.writeFileSync(file, JSON.stringify(dbTemplate({ name, connection_limit: 3 }, { external_id: name })))
    const out = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
      execFile(process.execPath, ['bin/kiln.mjs', 'stack', 'import', 'from-cli', '-t', file, '--preview'], { env: childEnv({ KILN_URL: api.url, KILN_TOKEN: api.a.token }), timeout: 60_000 }, (err, stdout, stderr) =>
        resolve({ code: err ? 1 : 0, stdout, stderr }),
      ),
    )
    expect(out.code, out.stderr).toBe(0)
    expect(out.stdout).toMatch(new RegExp(`db\\s+Kiln::Postgres::Database\\s+${name}\\s+adopt`))
    expect(out.stdout).toContain('1 to adopt, 0 already adopted, 0 refused, 0 not looked at  (a new stack from-cli)')
  })
})
