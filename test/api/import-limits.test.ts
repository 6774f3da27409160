/**
 * An import preview's cost is bounded whatever a tenant sends, so that one
 * project cannot slow the web server or the target PostgreSQL server for the
 * others: at most KILN_MAX_IMPORT_PREVIEW_ITEMS resources are looked at (more
 * is a 413 naming the limit), a project may ask for so many previews (more is
 * a 429 with Retry-After, and another project is not touched), and
 * Kiln::Postgres::Database looks at all of a preview's databases through one
 * connection to the target server, counted by a TCP proxy in front of it (the
 * workers and the API reach the target through the proxy alike).
 */
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startApiServer, type ApiServer } from '../helpers/api-server'
import { TestCluster } from '../helpers/cluster'
import { testDatabase, type TestDatabase } from '../helpers/db'
import { serverNames } from '../helpers/target-cleanup'
import { tcpProxy, type TcpProxy } from '../helpers/tcp-proxy'

let db: TestDatabase
let proxy: TcpProxy
let c: TestCluster
let api: ApiServer
let admin: pg.Client
const servers: ApiServer[] = []

beforeAll(async () => {
  db = await testDatabase()
  proxy = await tcpProxy(db.url)
  c = await TestCluster.start(db.url, { workers: 1, env: { KILN_TARGET_DATABASE_URL: proxy.url } })
  api = await started()
  admin = new pg.Client({ connectionString: db.urlFor('postgres') })
  await admin.connect()
}, 120_000)

afterAll(async () => {
  if (admin) await names.drop(admin)
  await admin?.end()
  for (const s of servers) await s.close()
  await c?.stop()
  await proxy?.close()
  await db?.drop()
})

async function started(opts: { maxImportPreviewItems?: number; importPreviewsPerWindow?: number } = {}): Promise<ApiServer> {
  const s = await startApiServer(c, { ...opts, typeConfig: { workspaceDir: c.workspace, targetDatabaseUrl: proxy.url } })
  servers.push(s)
  return s
}

const V = '2018-08-31'
const names = serverNames('kiln_ipl')
/** application_name of the connections that only look at databases (lib/resources/builtin/postgres-database.ts). */
const OBSERVER = 'kiln-pg-observe'

const files = (n: number) => ({
  heat_template_version: V,
  resources: Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}`, { type: 'Kiln::File', properties: { path: `f${i}.txt` }, external_id: `f${i}.txt` }])),
})

test('a preview of 100 databases looks at all of them through one connection to the target server', async () => {
  // Twelve databases the project kept (deletion_policy Retain): each is looked at on the server.
  // (One connection each: twelve at the default limit would pass the project's connection budget.)
  const kept = Array.from({ length: 12 }, () => names.fresh())
  const made = await api.call('POST', '/api/stacks', {
    body: { name: 'keeper', template: { heat_template_version: V, resources: Object.fromEntries(kept.map((n) => [n, { type: 'Kiln::Postgres::Database', properties: { name: n, connection_limit: 1 }, deletion_policy: 'Retain' }])) } },
  })
  expect(made.status, made.text).toBe(201)
  expect(await c.settle(made.body.stack.id, 120_000)).toBe('CREATE_COMPLETE')
  expect((await api.call('DELETE', `/api/stacks/${made.body.stack.id}`)).status).toBe(202)
  expect(await c.settle(made.body.stack.id, 120_000)).toBe('DELETE_COMPLETE')

  // And 88 names of nothing: 100 items, the default limit.
  const wanted = [...kept, ...Array.from({ length: 88 }, (_, i) => `kiln_ipl_none_${i}`)]
  const template = { heat_template_version: V, resources: Object.fromEntries(wanted.map((n) => [n, { type: 'Kiln::Postgres::Database', properties: { name: n }, external_id: n }])) }
  const before = proxy.opened(OBSERVER)
  const preview = await api.call('POST', '/api/import/preview', { body: { name: 'adopter', template } })
  expect(preview.status, preview.text).toBe(200)
  expect(preview.body.summary).toEqual({ adopt: 12, adopted: 0, refused: 88, error: 0 })
  expect(proxy.opened(OBSERVER) - before).toBe(1)
})

describe('limits', () => {
  test(`more resources with external_id than KILN_MAX_IMPORT_PREVIEW_ITEMS is a 413 naming the limit, before anything is looked at`, async () => {
    const small = await started({ maxImportPreviewItems: 3 })
    const over = await small.call('POST', '/api/import/preview', { body: { name: 'many', template: files(4) } })
    expect(over.status, over.text).toBe(413)
    expect(over.body.error).toEqual({
      code: 'limit_exceeded',
      message: 'the template has 4 resources with external_id; an import preview looks at 3 at most (KILN_MAX_IMPORT_PREVIEW_ITEMS)',
      limit: 'import_preview_items',
      max: 3,
    })
    const within = await small.call('POST', '/api/import/preview', { body: { name: 'many', template: files(3) } })
    expect(within.status, within.text).toBe(200)
    expect(within.body.items).toHaveLength(3)
  })

  test('a project that asked for its previews is answered 429 with Retry-After; another project is not touched', async () => {
    const limited = await started({ importPreviewsPerWindow: 2 })
    const preview = (token: string) => limited.call('POST', '/api/import/preview', { token, body: { name: 'rate', template: files(1) } })
    for (let i = 0; i < 2; i++) expect((await preview(limited.b.token)).status).toBe(200)
    const refused = await preview(limited.b.token)
    expect(refused.status, refused.text).toBe(429)
    expect(refused.body.error.message).toMatch(/^too many import previews for this project \(KILN_IMPORT_PREVIEWS_PER_MINUTE\); retry in \d+ s$/)
    const retryAfter = Number(refused.headers.get('retry-after'))
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(3600)
    // Project A's previews are its own to spend.
    for (let i = 0; i < 2; i++) expect((await preview(limited.a.token)).status).toBe(200)
    expect((await preview(limited.a.token)).status).toBe(429)
    // An import itself is not a preview: it is not counted.
    expect((await limited.call('POST', '/api/import', { token: limited.b.token, body: { name: 'rate', template: files(1) } })).status).not.toBe(429)
  })
})
