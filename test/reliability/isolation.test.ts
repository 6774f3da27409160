/**
 * Isolation and auth, route by route: every Kiln route (from the OpenAPI
 * document, so a new route is covered the day it is added) and every Heat
 * route, tried with no token, a malformed one, an expired one, a revoked one
 * and another project's token; CSRF attempts with a session cookie; sockets
 * with bad credentials; and a hidden parameter's value searched for in every
 * response, socket event and worker log line. Everything must fail closed.
 */
import crypto from 'node:crypto'
import { io as connect } from 'socket.io-client'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createToken } from '../../lib/auth/tokens'
import { makeProject, startApiServer, type ApiServer } from '../helpers/api-server'
import { TestCluster } from '../helpers/cluster'
import { testDatabase, type TestDatabase } from '../helpers/db'

const SECRET = `s3cr3t-${crypto.randomBytes(6).toString('hex')}`
const TEMPLATE = `heat_template_version: 2018-08-31
parameters:
  password:
    type: string
    hidden: true
    default: changeme
resources:
  holder:
    type: OS::Heat::TestResource
    properties:
      value: { get_param: password }
  plain:
    type: OS::Heat::TestResource
    properties:
      value: visible
outputs:
  leaked:
    value: { get_attr: [holder, output] }
`

let db: TestDatabase
let c: TestCluster
let api: ApiServer
let stackId = ''
let stackName = ''
const socketEvents: string[] = []

/** Kiln routes from the OpenAPI document, path parameters filled in. */
async function kilnRoutes(fill: Record<string, string>): Promise<{ method: string; path: string; public: boolean }[]> {
  const doc = (await api.call('GET', '/api/openapi.json', { token: null })).body as { paths: Record<string, Record<string, { security?: unknown[] }>> }
  const out: { method: string; path: string; public: boolean }[] = []
  for (const [p, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const path = p.replace(/\{(\w+)\}/g, (_, k: string) => fill[k] ?? crypto.randomUUID())
      out.push({ method: method.toUpperCase(), path, public: Array.isArray(op.security) && op.security.length === 0 })
    }
  }
  return out
}

/** Every Heat route, for one project id and stack. */
function heatRoutes(project: string, name: string, id: string): { method: string; path: string }[] {
  const s = `/v1/${project}/stacks/${name}/${id}`
  return [
    ['GET', `/v1/${project}/stacks`], ['POST', `/v1/${project}/stacks`], ['POST', `/v1/${project}/validate`],
    ['GET', `/v1/${project}/resource_types`], ['GET', `/v1/${project}/resource_types/OS::Heat::None`],
    ['GET', `/v1/${project}/stacks/${name}`], ['GET', `/v1/${project}/stacks/${name}/resources`], ['GET', `/v1/${project}/stacks/${name}/events`],
    ['GET', `/v1/${project}/stacks/${name}/template`], ['GET', `/v1/${project}/stacks/${name}/outputs`], ['DELETE', `/v1/${project}/stacks/${name}`],
    ['PUT', `/v1/${project}/stacks/${name}`], ['PATCH', `/v1/${project}/stacks/${name}`], ['POST', `/v1/${project}/stacks/${name}/actions`],
    ['GET', s], ['PUT', s], ['PATCH', s], ['DELETE', s], ['PUT', `${s}/preview`], ['POST', `${s}/actions`], ['GET', `${s}/template`],
    ['GET', `${s}/outputs`], ['GET', `${s}/outputs/leaked`], ['GET', `${s}/resources`], ['GET', `${s}/resources/holder`], ['GET', `${s}/events`],
    ['GET', `${s}/resources/holder/events`],
  ].map(([method, path]) => ({ method: method!, path: path! }))
}

/** A body each route accepts, so that what decides the answer is who asks, not what is sent. */
const bodyFor = (method: string, path = '') =>
  method === 'GET' || method === 'DELETE'
    ? undefined
    : path.endsWith('/cancel')
      ? { rollback: true }
      : path.endsWith('/actions')
        ? { check: null }
        : /\/api\/stacks\/[^/]+(\/preview)?$/.test(path)
          ? { template: TEMPLATE }
          : { template: TEMPLATE, name: 'x' }

beforeAll(async () => {
  db = await testDatabase()
  c = await TestCluster.start(db.url, { workers: 1, leaseMs: 2000, env: { KILN_LOG_LEVEL: 'debug' } })
  api = await startApiServer(c)
  const created = await api.call('POST', '/api/stacks', { body: { name: `iso-${crypto.randomBytes(3).toString('hex')}`, template: TEMPLATE, parameters: { password: SECRET } } })
  expect(created.status).toBe(201)
  stackId = created.body.stack.id
  stackName = created.body.stack.name
  expect(await c.settle(stackId)).toBe('CREATE_COMPLETE')
  // Then an update watched from its start: every event it sends over the socket is searched too.
  const s = connect(api.url, { transports: ['websocket'], auth: { token: api.a.token } })
  s.on('stack:events', (m: unknown) => socketEvents.push(JSON.stringify(m)))
  await new Promise<void>((resolve) => s.on('connect', () => s.emit('stack:subscribe', stackId, () => resolve())))
  const updated = await api.call('PATCH', `/api/stacks/${stackId}`, { body: { parameters: { password: `${SECRET}-2` } } })
  expect(updated.status).toBe(202)
  expect(await c.settle(stackId)).toBe('UPDATE_COMPLETE')
  await c.waitFor(async () => socketEvents.some((e) => e.includes('UPDATE') && e.includes('COMPLETE')), 10_000, 'the update events on the socket')
  s.close()
}, 120_000)

afterAll(async () => {
  await api?.close()
  await c?.stop()
  await db?.drop()
})

describe('every route fails closed', () => {
  test('without a token, with a malformed, an expired or a revoked token: 401 (public routes excepted)', async () => {
    const expired = await createToken(c.db.pool, api.a.projectId, 'expired', { role: 'admin', expiresAt: new Date(Date.now() - 60_000) })
    const revoked = await createToken(c.db.pool, api.a.projectId, 'revoked', { role: 'admin' })
    expect((await api.call('DELETE', `/api/tokens/${revoked.id}`)).status).toBe(204)
    const routes = [...(await kilnRoutes({ stack: stackId, traversal: 'current', token: revoked.id, type: 'OS::Heat::None' })), ...heatRoutes(api.a.projectId, stackName, stackId).map((r) => ({ ...r, public: false }))]
    expect(routes.length).toBeGreaterThan(50)
    const failures: string[] = []
    for (const r of routes) {
      for (const [label, token] of [['none', null], ['malformed', 'not a token'], ['expired', expired.secret], ['revoked', revoked.secret]] as const) {
        const res = await api.call(r.method, r.path, { token, body: bodyFor(r.method, r.path) })
        const want = r.public ? res.status < 500 && res.status !== 401 : res.status === 401
        if (!want) failures.push(`${label} ${r.method} ${r.path} -> ${res.status}`)
        if (res.text.includes(SECRET)) failures.push(`${label} ${r.method} ${r.path} leaked the secret`)
      }
    }
    expect(failures).toEqual([])
    // none of those requests wrote anything
    const { rows } = await c.db.pool.query(`SELECT count(*)::int AS n FROM stack`)
    expect(rows[0].n).toBe(1)
  })

  test("another project's token: the first project's stack is indistinguishable from a missing one", async () => {
    const missing = crypto.randomUUID()
    const routes = (await kilnRoutes({ stack: stackId, traversal: 'current', type: 'OS::Heat::None' })).filter((r) => r.path.includes(stackId))
    expect(routes.length).toBeGreaterThan(12)
    const failures: string[] = []
    for (const r of routes) {
      const theirs = await api.call(r.method, r.path, { token: api.b.token, body: bodyFor(r.method, r.path) })
      const none = await api.call(r.method, r.path.replace(stackId, missing), { token: api.b.token, body: bodyFor(r.method, r.path) })
      if (theirs.status !== 404 || none.status !== 404) failures.push(`${r.method} ${r.path}: ${theirs.status} (missing: ${none.status})`)
      if (theirs.text.replaceAll(stackId, '').replaceAll(missing, '') !== none.text.replaceAll(missing, '').replaceAll(stackId, '')) failures.push(`${r.method} ${r.path}: body differs from a missing stack's`)
      if (theirs.text.includes(stackName)) failures.push(`${r.method} ${r.path}: names the stack`)
    }
    // Heat: B's token on A's project path, and on its own path naming A's stack.
    for (const r of [...heatRoutes(api.a.projectId, stackName, stackId), ...heatRoutes(api.b.projectId, stackName, stackId)]) {
      const res = await api.call(r.method, r.path, { token: api.b.token, body: bodyFor(r.method, r.path) })
      const ownList = r.method === 'GET' && (r.path.endsWith(`/v1/${api.b.projectId}/stacks`) || r.path.includes('/resource_types'))
      const ownWrite = r.path.startsWith(`/v1/${api.b.projectId}/`) && ((r.method === 'POST' && (r.path.endsWith('/stacks') || r.path.endsWith('/validate'))))
      if (ownList || ownWrite) continue
      if (![401, 403, 404].includes(res.status)) failures.push(`heat ${r.method} ${r.path} -> ${res.status}`)
      if (res.text.includes(stackName) && !r.path.includes(stackName)) failures.push(`heat ${r.method} ${r.path}: names the stack`)
      if (res.text.includes(SECRET)) failures.push(`heat ${r.method} ${r.path}: leaked the secret`)
    }
    expect(failures).toEqual([])
    expect((await c.stack(stackId)).status).toBe('COMPLETE') // nothing B did touched it
  })

  test('CSRF: a session cookie without the header, with a wrong one, or from another origin cannot write', async () => {
    const login = await fetch(`${api.url}/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: api.a.token }) })
    const cookie = login.headers.get('set-cookie')!.split(';')[0]!
    const { csrfToken } = (await login.json()) as { csrfToken: string }
    const traversalsBefore = (await c.db.pool.query(`SELECT count(*)::int AS n FROM traversal WHERE stack_id = $1`, [stackId])).rows[0].n as number
    const write = (headers: Record<string, string>) =>
      fetch(`${api.url}/api/stacks/${stackId}/check`, { method: 'POST', headers: { cookie, 'content-type': 'application/json', ...headers }, body: '{}' }).then((r) => r.status)
    expect(await write({})).toBe(403)
    expect(await write({ 'x-csrf-token': 'wrong' })).toBe(403)
    expect(await write({ 'x-csrf-token': csrfToken, origin: 'http://evil.example' })).toBe(403)
    expect((await c.db.pool.query(`SELECT count(*)::int AS n FROM traversal WHERE stack_id = $1`, [stackId])).rows[0].n).toBe(traversalsBefore)
    // the same cookie, same origin, with the header: allowed (so the refusals above are about CSRF)
    expect(await write({ 'x-csrf-token': csrfToken, origin: api.url })).toBe(202)
    expect(await c.settle(stackId)).toBe('CHECK_COMPLETE')
  })

  test('sockets: no credentials, a bad token or a foreign-origin cookie cannot connect; another project cannot join the room', async () => {
    const attempt = (opts: Parameters<typeof connect>[1]) =>
      new Promise<string>((resolve) => {
        const s = connect(api.url, { transports: ['websocket'], reconnection: false, ...opts })
        s.on('connect_error', (e) => (s.close(), resolve(`refused: ${e.message}`)))
        s.on('connect', () => s.emit('stack:subscribe', stackId, (ack: { ok: boolean; error?: string }) => (s.close(), resolve(ack.ok ? 'joined' : `not joined: ${ack.error}`))))
      })
    const expired = await createToken(c.db.pool, api.a.projectId, 'expired2', { expiresAt: new Date(Date.now() - 1000) })
    const login = await fetch(`${api.url}/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: api.a.token }) })
    const cookie = login.headers.get('set-cookie')!.split(';')[0]!
    expect(await attempt({})).toBe('refused: unauthorized')
    expect(await attempt({ auth: { token: 'nope' } })).toBe('refused: unauthorized')
    expect(await attempt({ auth: { token: expired.secret } })).toBe('refused: unauthorized')
    expect(await attempt({ extraHeaders: { cookie, origin: 'http://evil.example' } })).toBe('refused: unauthorized')
    expect(await attempt({ auth: { token: api.b.token } })).toBe('not joined: not found')
    expect(await attempt({ extraHeaders: { cookie, origin: api.url } })).toBe('joined')
    expect(await attempt({ auth: { token: api.a.token } })).toBe('joined')
  })
})

// The secret is passed as a parameter value, as passwords are. (A default written into the
// template text is part of the template and is returned as written, as Heat does.)
test('a hidden parameter appears in no response, socket event or log line', async () => {
  const p = api.a.projectId
  const heat = `/v1/${p}/stacks/${stackName}/${stackId}`
  const paths = [
    `/api/stacks/${stackId}`, `/api/stacks/${stackId}/resources`, `/api/stacks/${stackId}/resources?all=1`, `/api/stacks/${stackId}/events?limit=1000`,
    `/api/stacks/${stackId}/traversals`, `/api/stacks/${stackId}/template`, `/api/stacks/${stackId}/outputs`,
    ...['json', 'dot', 'graphml'].map((f) => `/api/stacks/${stackId}/traversals/current/graph?format=${f}`),
    `/api/stacks?limit=100`, heat, `${heat}/resources`, `${heat}/resources/holder`, `${heat}/events`, `${heat}/template`, `${heat}/outputs`, `${heat}/outputs/leaked`,
    `${heat}/resources/holder/events`,
  ]
  const seen: string[] = []
  for (const path of paths) {
    const res = await api.call('GET', path)
    expect(res.status, path).toBe(200)
    if (res.text.includes(SECRET)) seen.push(path) // (also finds SECRET-2, the updated value)
  }
  // a preview and a validate that echo the template's parameters
  for (const [m, path, body] of [['POST', `/api/stacks/${stackId}/preview`, { existing: true }], ['POST', '/api/templates/validate', { template: TEMPLATE }]] as const) {
    const res = await api.call(m, path, { body })
    expect(res.status, path).toBeLessThan(300)
    if (res.text.includes(SECRET)) seen.push(path)
  }
  expect(socketEvents.length, 'socket events captured').toBeGreaterThan(0)
  if (socketEvents.some((e) => e.includes(SECRET))) seen.push('socket events') // (also finds SECRET-2, the updated value)
  const logs = c.workers.map((w) => w.output.join('')).join('\n')
  expect(logs.length, 'worker log captured').toBeGreaterThan(0) // debug logging is on: there is something to search
  if (logs.includes(SECRET)) seen.push('worker logs')
  // the masked values are there instead
  expect((await api.call('GET', `/api/stacks/${stackId}`)).body.stack.parameters.password).toBe('******')
  expect(seen).toEqual([])
})

test('a second project made through the API starts empty and cannot see the first', async () => {
  const third = await makeProject(c, 'member')
  const list = await api.call('GET', '/api/stacks', { token: third.token })
  expect(list.status).toBe(200)
  expect(list.body.stacks).toEqual([])
})
