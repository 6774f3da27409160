/**
 * Tenants stay inside their project, attacked as a hostile tenant would:
 * project B's stacks over the real API, run by real worker processes, against
 * project A's files and database, and B's database login used for real.
 *
 *   - Kiln::File: B's three-file stack that forged A's ownership record (under
 *     an un-normalised path) is refused; with normalised paths it lands in B's
 *     own workspace, and A's file survives B's create and delete; content over
 *     the size limit is refused at submit time, large content is cut in API
 *     responses, and a project's files stay within its quota.
 *   - Kiln::Postgres::Database on Kiln's own server (the default target): B's
 *     login reaches B's database and nothing else (not Kiln's database, not
 *     A's, not `postgres`), within its connection limit; and an operator's
 *     role of the name B asks for is neither taken over nor dropped.
 */
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import pg from 'pg'
import { describe, expect, test } from 'vitest'
import { MAX_FILE_BYTES } from '../../lib/resources/builtin/file'
import { useKilnEnv } from '../helpers/stack-env'

const QUOTA = 1_000_000
const TENANT_CONNECTIONS = 3

const { db, cluster: c, api } = useKilnEnv({ cluster: { workers: 2, env: { KILN_WORKSPACE_QUOTA_BYTES: String(QUOTA), KILN_TENANT_CONNECTION_LIMIT: String(TENANT_CONNECTIONS) } } })

const hot = (resources: Record<string, unknown>, outputs: Record<string, unknown> = {}) => ({ heat_template_version: '2018-08-31', resources, outputs })
const file = (p: string, content: unknown, extra: Record<string, unknown> = {}) => ({ type: 'Kiln::File', properties: { path: p, content }, ...extra })

/** Content of `unit.length * 10^levels` bytes from a template of a few hundred: str_replace nested `levels` deep. */
function amplified(unit: string, levels: number): unknown {
  let v: unknown = unit
  for (let i = 0; i < levels; i++) v = { str_replace: { template: 'Z'.repeat(10), params: { Z: v } } }
  return v
}

type Who = 'a' | 'b'
const token = (who: Who) => (who === 'a' ? api.a.token : api.b.token)

async function createStack(who: Who, template: unknown): Promise<string> {
  const r = await api.call('POST', '/api/stacks', { token: token(who), body: { name: `${who}-${crypto.randomBytes(3).toString('hex')}`, template } })
  expect(r.status, r.text).toBe(201)
  return r.body.stack.id as string
}

async function deleteStack(who: Who, id: string): Promise<void> {
  expect((await api.call('DELETE', `/api/stacks/${id}`, { token: token(who) })).status).toBe(202)
  expect(await c.settle(id)).toBe('DELETE_COMPLETE')
}

describe('Kiln::File across projects', () => {
  test("another project's stack can neither overwrite, take over nor delete a project's file", async () => {
    const aStack = await createStack('a', hot({ conf: file('shared/conf.txt', 'A') }))
    expect(await c.settle(aStack)).toBe('CREATE_COMPLETE')
    const aFile = path.join(c.projectWorkspace(api.a.projectId), 'shared/conf.txt')

    // B's attack: an ownership record "of its own" where the record of A's file used to live (a path
    // that only looks outside the reserved directory), then the same path as A's file, by two names.
    const forged = { str_replace: { template: '{"stackId": "SID", "resource": "victim", "uuid": "00000000-0000-4000-8000-000000000000"}', params: { SID: { get_param: 'OS::stack_id' } } } }
    const attack = hot({
      forge: file('./.kiln/owners/shared/conf.txt.json', forged),
      victim: file('shared/conf.txt', 'B', { depends_on: ['forge'] }),
      alias: file('./shared/conf.txt', 'B', { depends_on: ['victim'] }),
    })
    const refused = await api.call('POST', '/api/stacks', { token: api.b.token, body: { name: 'b-forge', template: attack } })
    expect(refused.status, refused.text).toBe(400)
    expect(refused.body.error.issues.map((i: { path: string }) => i.path).sort()).toEqual(['resources.alias.properties.path', 'resources.forge.properties.path'])
    expect(fs.readFileSync(aFile, 'utf8')).toBe('A')

    // The same stack with plain paths runs, in B's own workspace.
    const bStack = await createStack('b', hot({
      forge: file('.kiln/owners/shared/conf.txt.json', forged),
      victim: file('shared/conf.txt', 'B', { depends_on: ['forge'] }),
      third: file('shared/other.txt', 'B', { depends_on: ['victim'] }),
    }))
    expect(await c.settle(bStack)).toBe('CREATE_COMPLETE')
    expect(c.workspaceFiles(api.b.projectId)).toEqual(['.kiln/owners/shared/conf.txt.json', 'shared/conf.txt', 'shared/other.txt'])
    expect(fs.readFileSync(aFile, 'utf8')).toBe('A')
    const shown = (await api.call('GET', `/api/stacks/${bStack}/resources`, { token: api.b.token })).body.resources as { name: string; attributes: { path: string } }[]
    expect(shown.find((r) => r.name === 'victim')!.attributes.path).toBe('shared/conf.txt') // relative to B's workspace, where it is

    await deleteStack('b', bStack)
    expect(fs.readFileSync(aFile, 'utf8')).toBe('A')
    expect(fs.readdirSync(c.projectWorkspace(api.b.projectId))).toEqual([]) // and no empty directory is left
    // A's stack is intact and says so
    expect((await api.call('POST', `/api/stacks/${aStack}/check`, { token: api.a.token })).status).toBe(202)
    expect(await c.settle(aStack)).toBe('CHECK_COMPLETE')
    await deleteStack('a', aStack)
  })

  test("content over the limit is refused at submit time, large content is cut in API responses, and a project's files stay within its quota", async () => {
    // ~1.2 MB from a template of a few hundred bytes
    const big = await api.call('POST', '/api/stacks', { token: api.b.token, body: { name: 'b-big', template: hot({ big: file('big.txt', amplified('x'.repeat(120), 4)) }) } })
    expect(big.status, big.text.slice(0, 300)).toBe(400)
    expect(big.body.error.issues).toEqual([expect.objectContaining({ path: 'resources.big.properties.content', message: `the content may be at most ${MAX_FILE_BYTES} bytes` })])

    // 600 KB: within the limit; written in full, shown cut
    const large = await createStack('b', hot({ large: file('large.txt', amplified('y'.repeat(60), 4)) }))
    expect(await c.settle(large)).toBe('CREATE_COMPLETE')
    expect(fs.statSync(path.join(c.projectWorkspace(api.b.projectId), 'large.txt')).size).toBe(600_000)
    const res = await api.call('GET', `/api/stacks/${large}/resources`, { token: api.b.token })
    expect(res.status).toBe(200)
    expect(res.text.length).toBeLessThan(20_000)
    expect(res.body.resources[0].properties.content).toMatch(/^y{4096}… \[600000 bytes in all; the first 4096 shown\]$/)
    expect(res.body.resources[0].attributes.size).toBe(600_000)

    // Another 600 KB file would take project B past its quota (1 MB); A's quota is its own.
    const over = await createStack('b', hot({ more: file('more.txt', amplified('z'.repeat(60), 4)) }))
    expect(await c.settle(over)).toBe('CREATE_FAILED')
    expect((await c.stack(over)).statusReason).toContain(`600000 bytes would take the project's files to 1200000 bytes, over its workspace quota of ${QUOTA} bytes`)
    expect(fs.existsSync(path.join(c.projectWorkspace(api.b.projectId), 'more.txt'))).toBe(false)
    const inA = await createStack('a', hot({ more: file('more.txt', amplified('z'.repeat(60), 4)) }))
    expect(await c.settle(inA)).toBe('CREATE_COMPLETE')
    for (const [who, id] of [['b', large], ['b', over], ['a', inA]] as const) await deleteStack(who, id)
  })
})

describe('Kiln::Postgres::Database on Kiln\'s own server', () => {
  const dbTemplate = (props: Record<string, unknown> = {}) => hot({ db: { type: 'Kiln::Postgres::Database', properties: props } }, { url: { value: { get_attr: ['db', 'url'] } }, name: { value: { get_attr: ['db', 'database'] } } })
  const admin = async <T>(fn: (c: pg.Client) => Promise<T>): Promise<T> => {
    const client = new pg.Client({ connectionString: db.urlFor('postgres') })
    await client.connect()
    try {
      return await fn(client)
    } finally {
      await client.end()
    }
  }
  /** Log in with `url`, in database `database` if given; the error (SQLSTATE and message) when refused. */
  async function login(url: string, database?: string): Promise<{ ok: true; db: string } | { ok: false; code: string; message: string }> {
    const u = new URL(url)
    if (database) u.pathname = `/${database}`
    const client = new pg.Client({ connectionString: u.toString() })
    try {
      await client.connect()
      const { rows } = await client.query('SELECT current_database() AS db')
      return { ok: true, db: rows[0].db }
    } catch (err) {
      const e = err as { code?: string; message: string }
      return { ok: false, code: e.code ?? '', message: e.message }
    } finally {
      await client.end().catch(() => {})
    }
  }

  test("a tenant's login reaches its own database and nothing else: not Kiln's, not another project's, not `postgres`; within its connection limit", async () => {
    const aStack = await createStack('a', dbTemplate())
    const bStack = await createStack('b', dbTemplate())
    expect(await c.settle(aStack)).toBe('CREATE_COMPLETE')
    expect(await c.settle(bStack)).toBe('CREATE_COMPLETE')
    const outputs = async (who: Who, id: string) => {
      const all = (await api.call('GET', `/api/stacks/${id}/outputs`, { token: token(who) })).body.outputs as Record<string, { value: string }>
      // The url carries the role's password: a sensitive output, shown only when asked for by name.
      const url = (await api.call('GET', `/api/stacks/${id}/outputs/url?reveal=true`, { token: token(who) })).body.output as { value: string }
      return { ...all, url } as Record<string, { value: string }>
    }
    const a = await outputs('a', aStack)
    const b = await outputs('b', bStack)
    const bRole = b.name!.value

    expect(await login(b.url!.value)).toEqual({ ok: true, db: bRole })
    // Kiln's own database (its events, NOTIFY channels, advisory locks, connections), A's database, the maintenance database
    for (const target of [db.name, a.name!.value, 'postgres', 'template1']) {
      const tried = await login(b.url!.value, target)
      expect(tried, target).toMatchObject({ ok: false })
      expect(['28000', '42501'], `${target}: ${JSON.stringify(tried)}`).toContain((tried as { code: string }).code)
    }
    // PostgreSQL itself says so, whatever pg_hba.conf: CONNECT is revoked from PUBLIC on Kiln's database and on A's.
    const may = await admin((cl) => cl.query(`SELECT d AS database, has_database_privilege($1, d, 'CONNECT') AS may FROM unnest($2::text[]) d`, [bRole, [db.name, a.name!.value, bRole]]))
    expect(may.rows).toEqual([{ database: db.name, may: false }, { database: a.name!.value, may: false }, { database: bRole, may: true }])

    // The role's connections are limited.
    const held: pg.Client[] = []
    try {
      for (let i = 0; i < TENANT_CONNECTIONS; i++) {
        const cl = new pg.Client({ connectionString: b.url!.value })
        await cl.connect()
        held.push(cl)
      }
      expect(await login(b.url!.value)).toMatchObject({ ok: false, code: '53300' })
    } finally {
      await Promise.all(held.map((cl) => cl.end()))
    }
    for (const [who, id] of [['a', aStack], ['b', bStack]] as const) await deleteStack(who, id)
    const left = await admin((cl) => cl.query(`SELECT rolname FROM pg_roles WHERE rolname = ANY($1)`, [[bRole, a.name!.value]]))
    expect(left.rows).toEqual([])
  })

  test("an operator's role of the name a tenant asks for is neither taken over nor dropped", async () => {
    const operator = `app_reader_${crypto.randomBytes(4).toString('hex')}`
    await admin((cl) => cl.query(`CREATE ROLE ${operator} LOGIN PASSWORD 'operator-secret' IN ROLE pg_read_all_data`))
    try {
      const password = () => admin(async (cl) => (await cl.query('SELECT rolpassword FROM pg_authid WHERE rolname = $1', [operator])).rows[0]?.rolpassword as string | undefined)
      const before = await password()
      const bStack = await createStack('b', dbTemplate({ name: operator }))
      expect(await c.settle(bStack)).toBe('CREATE_FAILED')
      expect((await c.stack(bStack)).statusReason).toContain(`database ${operator}: the name is taken on the server by something this project does not own`)
      expect(await password()).toBe(before)
      await deleteStack('b', bStack)
      expect(await password()).toBe(before)
      expect((await admin((cl) => cl.query('SELECT 1 FROM pg_database WHERE datname = $1', [operator]))).rowCount).toBe(0)
    } finally {
      await admin((cl) => cl.query(`DROP ROLE IF EXISTS ${operator}`))
    }
  })
})
