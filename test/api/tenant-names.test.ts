/**
 * What one project can learn of another's databases through Kiln, over the
 * real API with worker processes and two projects (A asks, B owns):
 *
 *   - an external_id that is not A's to adopt (nothing of that name, a
 *     database without a Kiln record, B's database, B's snapshot) is one
 *     answer, in the import preview, an import and an update that adds it;
 *   - a `name` taken by something not A's (B's database or snapshot, an
 *     operator's database) is one answer too;
 *   - a default name says nothing of the stack, the resource or the project,
 *     so that a tenant's login, which can list pg_database, learns nothing by
 *     it; and a database named after its stack (how Kiln named them before)
 *     keeps its name through an update and is dropped by name with its stack.
 */
import { createHash } from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { useKilnEnv } from '../helpers/stack-env'
import { serverNames } from '../helpers/target-cleanup'

const { db, cluster: c, api } = useKilnEnv({ cluster: { workers: 2 } })
let admin: pg.Client

beforeAll(async () => {
  admin = new pg.Client({ connectionString: db.urlFor('postgres') })
  await admin.connect()
}, 120_000)

afterAll(async () => {
  if (admin) {
    await names.drop(admin)
    // Databases and roles of default (hashed) names a failed test left: every one this test's Kiln recorded.
    if (c) {
      const { rows } = await c.db.pool.query(`SELECT kind, key FROM outside_object WHERE kind IN ('pg_database', 'pg_role') ORDER BY kind`)
      for (const r of rows) await admin.query(`DROP ${r.kind === 'pg_database' ? 'DATABASE' : 'ROLE'} IF EXISTS "${r.key}"${r.kind === 'pg_database' ? ' WITH (FORCE)' : ''}`)
    }
  }
  await admin?.end()
})

const V = '2018-08-31'
const names = serverNames('kiln_tn')
const database = (props: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ type: 'Kiln::Postgres::Database', properties: props, ...extra })
const hot = (resources: Record<string, unknown>) => ({ heat_template_version: V, resources })
type Who = 'a' | 'b'
const tokenOf = (who: Who) => (who === 'a' ? api.a.token : api.b.token)

async function settled(who: Who, name: string, template: unknown, state: string): Promise<string> {
  const r = await api.call('POST', '/api/stacks', { token: tokenOf(who), body: { name, template } })
  expect(r.status, r.text).toBe(201)
  expect(await c.settle(r.body.stack.id)).toBe(state)
  return r.body.stack.id as string
}

async function deleted(who: Who, id: string): Promise<void> {
  expect((await api.call('DELETE', `/api/stacks/${id}`, { token: tokenOf(who) })).status).toBe(202)
  expect(await c.settle(id)).toBe('DELETE_COMPLETE')
}

const reasonOf = async (stackId: string, resource: string) => (await c.rows(stackId)).find((r) => r.name === resource)!.status_reason

/** Each reason with its own name taken out: equal texts mean the answers tell the cases apart only by the name asked for. */
const shapes = (reasons: [string, string][]) => reasons.map(([name, reason]) => reason.split(name).join('<name>'))

/** What A might name that is not A's: B's database and B's snapshot (Kiln's, of another project), an operator's database, nothing. */
async function othersObjects(): Promise<{ theirs: string; theirSnapshot: string; operators: string; nothing: string }> {
  const theirs = names.fresh()
  await deleted('b', await settled('b', `b-keep-${theirs}`, hot({ db: database({ name: theirs }, { deletion_policy: 'Retain' }) }), 'CREATE_COMPLETE'))
  const snapped = names.fresh()
  const snapStack = await settled('b', `b-snap-${snapped}`, hot({ db: database({ name: snapped }, { deletion_policy: 'Snapshot' }) }), 'CREATE_COMPLETE')
  await deleted('b', snapStack)
  const theirSnapshot = (await api.call('GET', `/api/stacks/${snapStack}/snapshots`, { token: api.b.token })).body.snapshots[0].name as string
  const operators = names.fresh()
  await admin.query(`CREATE DATABASE ${operators}`)
  return { theirs, theirSnapshot, operators, nothing: names.fresh() }
}

describe('answers', () => {
  test('an external_id that is not the project’s gets one answer, whatever it names: in the preview, an import and an update', async () => {
    const others = Object.values(await othersObjects())
    const template = hot(Object.fromEntries(others.map((n, i) => [`db${i}`, database({ name: n }, { external_id: n })])))
    const preview = await api.call('POST', '/api/import/preview', { body: { name: 'grabber', template } })
    expect(preview.status, preview.text).toBe(200)
    const items = preview.body.items as { externalId: string; outcome: string; reason: string }[]
    expect(items.map((i) => i.outcome)).toEqual(['refused', 'refused', 'refused', 'refused'])
    const previewed = shapes(items.map((i) => [i.externalId, i.reason]))
    expect(new Set(previewed).size, previewed.join('\n')).toBe(1)

    // Adopted by a create (an import) and by an update that adds the resource: the reason the row fails with.
    const imported: [string, string][] = []
    const updated: [string, string][] = []
    for (const n of others) {
      const create = await api.call('POST', '/api/import', { body: { name: `grab-${n}`, template: hot({ db: database({ name: n }, { external_id: n }) }) } })
      expect(create.status, create.text).toBe(201)
      expect(await c.settle(create.body.stack.id)).toBe('CREATE_FAILED')
      imported.push([n, await reasonOf(create.body.stack.id, 'db')])

      const stack = await settled('a', `grow-${n}`, hot({ v: { type: 'OS::Heat::Value', properties: { value: 1 } } }), 'CREATE_COMPLETE')
      const update = await api.call('PUT', `/api/stacks/${stack}`, { body: { template: hot({ v: { type: 'OS::Heat::Value', properties: { value: 1 } }, db: database({ name: n }, { external_id: n }) }) } })
      expect(update.status, update.text).toBe(202)
      expect(await c.settle(stack)).toBe('UPDATE_FAILED')
      updated.push([n, await reasonOf(stack, 'db')])
    }
    for (const answers of [shapes(imported), shapes(updated)]) expect(new Set(answers).size, answers.join('\n')).toBe(1)
    expect(shapes(imported)[0]).toContain(previewed[0]!)
    // Nothing changed hands.
    const owners = await c.db.pool.query(`SELECT DISTINCT project_id FROM outside_object WHERE key = ANY($1)`, [others])
    expect(owners.rows).toEqual([{ project_id: api.b.projectId }])
  })

  test('a name taken by something that is not the project’s gets one answer, whoever holds it', async () => {
    const { theirs, theirSnapshot, operators } = await othersObjects()
    const reasons: [string, string][] = []
    for (const n of [theirs, theirSnapshot, operators]) {
      const id = await settled('a', `take-${n}`, hot({ db: database({ name: n }) }), 'CREATE_FAILED')
      reasons.push([n, await reasonOf(id, 'db')])
    }
    const answers = shapes(reasons)
    expect(new Set(answers).size, answers.join('\n')).toBe(1)
    expect(answers[0]).toContain('database <name>: the name is taken on the server by something this project does not own; choose another name')
  })
})

describe('names', () => {
  test('a default name is a hash: it says nothing of the stack, the resource or the project, and stays the same through an update', async () => {
    const id = await settled('a', 'payroll-secret', hot({ customers: database({}) }), 'CREATE_COMPLETE')
    const [row] = await c.rows(id)
    const name = row!.physical_id!
    expect(name).toMatch(/^kiln_[0-9a-f]{24}$/)
    expect(name).toBe(`kiln_${createHash('sha256').update(`${id}/customers`).digest('hex').slice(0, 24)}`)

    // What B's own login sees of it: a name among others, nothing more.
    const bName = names.fresh()
    const bStack = await settled('b', 'b-db', { ...hot({ db: database({ name: bName }) }), outputs: { url: { value: { get_attr: ['db', 'url'] } } } }, 'CREATE_COMPLETE')
    const url = (await c.db.pool.query(`SELECT attributes->>'url' AS url FROM resource WHERE stack_id = $1`, [bStack])).rows[0].url as string
    const tenant = new pg.Client({ connectionString: url })
    await tenant.connect()
    const listed = (await tenant.query(`SELECT datname FROM pg_database UNION ALL SELECT rolname FROM pg_roles`)).rows.map((r) => r.datname as string)
    await tenant.end()
    expect(listed).toContain(name)
    expect(listed.filter((n) => /payroll|customers/.test(n) || n.includes(api.a.projectName.replace(/-/g, '_')))).toEqual([])

    const update = await api.call('PUT', `/api/stacks/${id}`, { body: { template: hot({ customers: database({ connection_limit: 4 }) }) } })
    expect(update.status, update.text).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect((await c.rows(id))[0]!.physical_id).toBe(name)
    expect((await admin.query('SELECT datconnlimit FROM pg_database WHERE datname = $1', [name])).rows).toEqual([{ datconnlimit: 4 }])
    await deleted('a', id)
    await deleted('b', bStack)
    expect((await admin.query('SELECT datname FROM pg_database WHERE datname = $1', [name])).rowCount).toBe(0)
  })

  test('a database named after its stack (by an earlier Kiln) keeps its name through an update, and goes with its stack', async () => {
    const id = await settled('a', 'Legacy-Stack', hot({ db: database({}) }), 'CREATE_COMPLETE')
    const hashed = (await c.rows(id))[0]!.physical_id!
    // What an earlier Kiln named it, and the row and records it left.
    const old = `kiln_legacy_stack_db_${id.replace(/-/g, '').slice(0, 8)}`
    await admin.query(`ALTER DATABASE ${hashed} RENAME TO ${old}`)
    await admin.query(`ALTER ROLE ${hashed} RENAME TO ${old}`)
    await c.db.pool.query(`UPDATE outside_object SET key = $2 WHERE key = $1`, [hashed, old])
    await c.db.pool.query(
      `UPDATE resource SET physical_id = $2, attributes = jsonb_set(jsonb_set(jsonb_set(attributes, '{database}', to_jsonb($2::text)), '{role}', to_jsonb($2::text)), '{url}', to_jsonb(replace(attributes->>'url', $1, $2)))
        WHERE stack_id = $3`,
      [hashed, old, id],
    )

    const update = await api.call('PUT', `/api/stacks/${id}`, { body: { template: hot({ db: database({ connection_limit: 4 }) }) } })
    expect(update.status, update.text).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect((await c.rows(id))[0]!.physical_id).toBe(old)
    const onServer = async () => (await admin.query('SELECT datname, datconnlimit FROM pg_database WHERE datname = ANY($1)', [[old, hashed]])).rows
    expect(await onServer()).toEqual([{ datname: old, datconnlimit: 4 }])
    await deleted('a', id)
    expect(await onServer()).toEqual([])
  })
})
