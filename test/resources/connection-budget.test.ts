/**
 * One tenant cannot take the PostgreSQL server's connections from Kiln or
 * from the other tenants: Kiln runs as a role that is NOT a superuser (as an
 * operator's DATABASE_URL may), on a server of its own whose max_connections
 * leaves tenants a budget of TENANTS connections beside what Kiln keeps for
 * itself, with real worker processes and the API over HTTP, two projects.
 *
 *   - Project B makes databases until Kiln refuses (its project's budget) and
 *     opens every connection its roles may, through the URLs it revealed;
 *     then a new worker starts, a new API pool serves project A, A's creates
 *     work and A's tenants connect; A's create past the server's budget is
 *     refused, naming the settings.
 *   - The server's own protection: with tenant roles' limits raised by hand
 *     past the budget, a role without pg_use_reserved_connections is locked
 *     out, and one granted it (with reserved_connections covering Kiln's
 *     needs) is not; the start-up report says what to grant.
 */
import crypto from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { kilnConnections } from '../../lib/config'
import { createDb, type Db } from '../../lib/db/client'
import { applyMigrations } from '../../lib/db/migrate'
import { parseEnv } from '../../lib/env'
import { targetCapacityReport } from '../../lib/resources/builtin/postgres-capacity'
import { startApiServer, type ApiServer } from '../helpers/api-server'
import { TestCluster } from '../helpers/cluster'
import { ownPostgres, type OwnPostgres } from '../helpers/own-postgres'

const TENANT_LIMIT = 5
const PROJECT_LIMIT = 15
/** What all tenants together may be given on this server. */
const TENANTS = 25
const ENV = { WORKERS: '2', KILN_WORKER_CONCURRENCY: '4', KILN_TENANT_CONNECTION_LIMIT: String(TENANT_LIMIT), KILN_PROJECT_CONNECTION_LIMIT: String(PROJECT_LIMIT) }
/** What Kiln keeps for itself with ENV (two workers and the web server); reserved_connections covers it too. */
const KILN = kilnConnections(parseEnv(ENV), true).target
const SUPERUSER_RESERVED = 3
const MAX = TENANTS + KILN + KILN + SUPERUSER_RESERVED

let server: OwnPostgres
let admin: pg.Client
/** Kiln's role: not a superuser; CREATEDB, CREATEROLE and the membership in the roles it makes. */
let appUrl: string
let c: TestCluster
let api: ApiServer
/** Every tenant connection the test opened, ended in afterAll. */
const held: pg.Client[] = []
const pools: Db[] = []

beforeAll(async () => {
  server = await ownPostgres('budget', { settings: { max_connections: String(MAX), reserved_connections: String(KILN), superuser_reserved_connections: String(SUPERUSER_RESERVED) } })
  admin = new pg.Client({ connectionString: server.url })
  await admin.connect()
  await admin.query(`CREATE ROLE kiln_app LOGIN CREATEDB CREATEROLE PASSWORD 'app-secret'`)
  await admin.query(`ALTER ROLE kiln_app SET createrole_self_grant = 'set, inherit'`)
  await admin.query(`CREATE DATABASE kiln_app OWNER kiln_app`)
  const u = new URL(server.url)
  u.username = 'kiln_app'
  u.password = 'app-secret'
  u.pathname = '/kiln_app'
  appUrl = u.toString()
  await applyMigrations(appUrl)
  c = await TestCluster.start(appUrl, { workers: 1, concurrency: 4, env: ENV })
  api = await startApiServer(c)
}, 180_000)

afterAll(async () => {
  await Promise.all(held.map((h) => h.end().catch(() => {})))
  await api?.close()
  for (const p of pools) await p.close()
  await c?.stop()
  await admin?.end()
  await server?.stop()
})

type Who = 'a' | 'b'
const token = (who: Who) => (who === 'a' ? api.a.token : api.b.token)
const dbTemplate = (props: Record<string, unknown> = {}) => ({
  heat_template_version: '2018-08-31',
  resources: { db: { type: 'Kiln::Postgres::Database', properties: props } },
  outputs: { url: { value: { get_attr: ['db', 'url'] } } },
})

/** A stack of one database, created through `via`, settled: its final state and reason. */
async function createDatabase(who: Who, props: Record<string, unknown> = {}, via: ApiServer = api): Promise<{ id: string; state: string; reason: string }> {
  const r = await via.call('POST', '/api/stacks', { token: token(who), body: { name: `${who}-${crypto.randomBytes(3).toString('hex')}`, template: dbTemplate(props) } })
  expect(r.status, r.text).toBe(201)
  const state = await c.settle(r.body.stack.id)
  return { id: r.body.stack.id, state, reason: (await c.rows(r.body.stack.id))[0]!.status_reason }
}

/** The database's URL, as its project sees it: a sensitive output, revealed by name. */
async function revealedUrl(who: Who, stackId: string): Promise<string> {
  const r = await api.call('GET', `/api/stacks/${stackId}/outputs/url?reveal=true`, { token: token(who) })
  expect(r.status, r.text).toBe(200)
  return r.body.output.value as string
}

/** Open `n` connections with `url`; the errors of those refused. */
async function connect(url: string, n: number): Promise<string[]> {
  const refused: string[] = []
  for (let i = 0; i < n; i++) {
    const cl = new pg.Client({ connectionString: url })
    cl.on('error', () => {})
    try {
      await cl.connect()
      held.push(cl)
    } catch (err) {
      refused.push(`${(err as { code?: string }).code}: ${(err as Error).message}`)
      await cl.end().catch(() => {})
    }
  }
  return refused
}

/** A fresh pool of Kiln's role that must open a connection now. */
async function kilnConnects(): Promise<string | null> {
  const cl = new pg.Client({ connectionString: appUrl })
  try {
    await cl.connect()
    return null
  } catch (err) {
    return `${(err as { code?: string }).code}: ${(err as Error).message}`
  } finally {
    await cl.end().catch(() => {})
  }
}

describe('connections of a server Kiln shares with its tenants', () => {
  const bUrls: string[] = []

  test("project B takes every connection its roles may; Kiln's workers and API and project A's creates still work, and a create past the budget is refused by name", async () => {
    // B makes databases until Kiln refuses one (its project's budget: PROJECT_LIMIT / TENANT_LIMIT of them).
    let refusal: { state: string; reason: string } | null = null
    for (let i = 0; i < 20 && !refusal; i++) {
      const made = await createDatabase('b')
      if (made.state === 'CREATE_COMPLETE') bUrls.push(await revealedUrl('b', made.id))
      else refusal = made
    }
    // B opens every connection its roles may hold, through the URLs it revealed.
    const bRefused = (await Promise.all(bUrls.map((u) => connect(u, TENANT_LIMIT)))).flat()

    // Kiln is not starved: its role still connects, a new worker process starts (its pool and listener connect) ...
    expect(await kilnConnects()).toBeNull()
    c.spawnWorker()
    await c.waitFor(async () => (await c.liveWorkers()) >= 2, 60_000, 'the second worker to start')
    // ... an API server with a fresh pool serves project A, whose databases are made and reached.
    const fresh = createDb(appUrl, { max: 4 })
    pools.push(fresh)
    const api2 = await startApiServer(c, { db: fresh })
    try {
      const aMade = [await createDatabase('a', {}, api2), await createDatabase('a', {}, api2)]
      expect(aMade.map((m) => m.state), aMade.map((m) => m.reason).join('\n')).toEqual(['CREATE_COMPLETE', 'CREATE_COMPLETE'])
      const aRefused = (await Promise.all(aMade.map(async (m) => connect(await revealedUrl('a', m.id), TENANT_LIMIT)))).flat()
      expect(aRefused).toEqual([])

      // What B got: its project's budget, every connection of it real, and no more.
      expect(bRefused).toEqual([])
      expect(bUrls).toHaveLength(PROJECT_LIMIT / TENANT_LIMIT)
      expect(refusal?.state).toBe('CREATE_FAILED')
      expect(refusal?.reason).toContain(`the project's database roles may hold ${PROJECT_LIMIT} connections together (KILN_PROJECT_CONNECTION_LIMIT); its other roles hold ${PROJECT_LIMIT}`)
      expect(await connect(bUrls[0]!, 1)).toEqual([expect.stringMatching(/^53300: too many connections for role/)])

      // The server's budget is spent (B 15, A 10): A's next database is refused, naming the settings ...
      const past = await createDatabase('a', {}, api2)
      expect(past.state).toBe('CREATE_FAILED')
      expect(past.reason).toContain(
        `the target server has ${TENANTS} connections for all tenants' databases together (max_connections ${MAX} − superuser_reserved_connections ${SUPERUSER_RESERVED} − reserved_connections ${KILN} − ${KILN} kept for Kiln's own connections); their roles hold ${TENANTS}`,
      )
      expect(past.reason).toContain('raise max_connections on the server, lower KILN_TENANT_CONNECTION_LIMIT, or give this database a lower connection_limit')
      // ... and one that asks for no connections fits (its role's limit is its connection_limit when lower).
      expect((await createDatabase('a', { connection_limit: 0 }, api2)).state).toBe('CREATE_COMPLETE')
      expect(await kilnConnects()).toBeNull()
    } finally {
      await api2.close()
    }
  }, 180_000)

  test("roles given more than the budget by hand lock out a Kiln role without reserved slots, not one granted pg_use_reserved_connections; the start-up report says so", async () => {
    const config = { workspaceDir: c.workspace, targetDatabaseUrl: appUrl, kilnConnections: KILN, projectQuotas: { connections: PROJECT_LIMIT, databases: 20, snapshots: 10, bytes: 1 << 30 } }
    const before = await targetCapacityReport(config, { ownServer: true })
    expect(before.info).toContain(`${TENANTS} connections for all their roles together`)
    expect(before.warnings).toEqual([expect.stringContaining(`keeps 0 connection slots for Kiln's role kiln_app, fewer than the ${KILN} Kiln may need`)])
    expect(before.warnings[0]).toContain('GRANT pg_use_reserved_connections TO "kiln_app";')

    // An operator raises B's roles' limits past the budget; B fills every slot the server gives non-privileged roles.
    const roles = bUrls.map((u) => decodeURIComponent(new URL(u).username))
    for (const r of roles) await admin.query(`ALTER ROLE "${r}" CONNECTION LIMIT ${MAX}`)
    for (const u of bUrls) await connect(u, MAX)
    expect(await kilnConnects()).toMatch(/^53300: remaining connection slots are reserved/)

    await admin.query('GRANT pg_use_reserved_connections TO kiln_app')
    expect(await kilnConnects()).toBeNull()
    const after = await targetCapacityReport(config, { ownServer: true })
    expect(after.warnings).toEqual([])
  })
})
