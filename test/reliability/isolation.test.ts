/**
 * Isolation and authentication, route by route. The routes are not listed by
 * hand: Kiln's come from /api/openapi.json (checked against the router, so a
 * route missing from the document fails here too) and Heat's from the router
 * the server mounts. Every route is tried
 *
 *   - with no token, a malformed one, an unknown well-formed one, an expired
 *     one (created expired, and expired by SQL after it worked), a revoked one
 *     (through DELETE /api/tokens/{id}, and by SQL), through X-Auth-Token and
 *     Authorization: Bearer, and with a session cookie whose token was revoked
 *     or whose session expired: 401, and nothing written;
 *   - with project B's token against project A's stack: 404 with exactly the
 *     body a missing stack gets (on the Heat API under B's project path; under
 *     A's project path every route is 403, whatever the stack);
 *   - with a session cookie but no X-CSRF-Token header, a wrong one, or the
 *     right one from a foreign Origin: 403 for every state-changing route.
 *
 * Socket.IO: `stack:subscribe` with each bad credential, another project's
 * token, a cookie from a foreign Origin, and a token revoked after connecting.
 * Finally a stack whose hidden parameters flow into properties, attributes,
 * outputs (directly and inside strings, lists and maps), a failure reason, an
 * environment and stale rows of earlier templates: the value is searched for
 * in every GET route of the stack (Kiln and Heat, redirects followed), the
 * socket stream and the worker logs.
 */
import crypto from 'node:crypto'
import { io as connect, type Socket } from 'socket.io-client'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createToken } from '../../lib/auth/tokens'
import { registeredRoutes, type RouteDef } from '../helpers/routes'
import { around, stackUrls, sweep } from '../helpers/secret-sweep'
import { useKilnEnv } from '../helpers/stack-env'

/** Routes that name an output, a resource or a snapshot of the target stack name these unless told otherwise. */
const DEFAULT_PARAMS: Record<string, string> = { key: 'out', resource: 'holder', snapshot: 'kiln_no_snapshot', provider: 'no-such-provider' }

const fill = (path: string, given: Record<string, string>) =>
  path.replace(/\{(\w+)\}/g, (_, k: string) => {
    const values = { ...DEFAULT_PARAMS, ...given }
    if (!(k in values)) throw new Error(`no value for {${k}} in ${path}`)
    return encodeURIComponent(values[k]!)
  })

const TEMPLATE = (value: string) => `heat_template_version: 2018-08-31
resources:
  holder:
    type: OS::Heat::TestResource
    properties:
      value: ${value}
outputs:
  out:
    value: { get_attr: [holder, output] }
`

/** A body each route accepts, so that what decides the answer is who asks, not what is sent. */
function bodyFor(method: string, path: string): unknown {
  if (method === 'GET' || method === 'DELETE') return undefined
  const tail = path.split('/').at(-1)!
  const heat = path.startsWith('/v1/')
  if (path === '/api/session') return { token: 'replaced per credential' }
  if (path === '/api/tokens') return { name: `t-${crypto.randomBytes(3).toString('hex')}` }
  if (path === '/api/projects') return { name: `p-${crypto.randomBytes(3).toString('hex')}` }
  if (path === '/api/templates/validate' || tail === 'validate') return { template: TEMPLATE('v') }
  if (path === '/api/stacks') return { name: `n-${crypto.randomBytes(3).toString('hex')}`, template: TEMPLATE('n') }
  if (heat && path.endsWith('/stacks')) return { stack_name: `h-${crypto.randomBytes(3).toString('hex')}`, template: TEMPLATE('h') }
  if (tail === 'cancel') return { rollback: false }
  if (tail === 'rollback' || tail === 'check' || tail === 'apply' || tail === 'signal') return {}
  if (tail === 'actions') return { check: null }
  if (method === 'PATCH') return { parameters: {} }
  return { template: TEMPLATE('u') }
}

const { cluster: c, api } = useKilnEnv({ cluster: { workers: 2, leaseMs: 2000, env: { KILN_LOG_LEVEL: 'debug' } } })
const routes: { kiln: RouteDef[]; heat: RouteDef[] } = { kiln: [], heat: [] }
/** Project A's stack that everything below tries to reach. */
const target = { id: '', name: '', traversalId: '', planId: '' }
/** A stack of project B, for cross-project traversal ids. */
let bStackId = ''

/** Everything a request could have written. */
async function snapshot(): Promise<Record<string, unknown>> {
  const { rows } = await c.db.pool.query(
    `SELECT (SELECT count(*) FROM stack)::int AS stacks, (SELECT count(*) FROM stack WHERE deleted_at IS NOT NULL)::int AS deleted,
            (SELECT count(*) FROM raw_template)::int AS templates, (SELECT count(*) FROM traversal)::int AS traversals,
            (SELECT count(*) FROM api_token)::int AS tokens, (SELECT count(*) FROM api_token WHERE revoked_at IS NOT NULL)::int AS revoked,
            (SELECT count(*) FROM project)::int AS projects, (SELECT count(*) FROM session)::int AS sessions,
            (SELECT string_agg(id::text || ':' || action || '_' || status || ':' || coalesce(current_traversal_id::text, '-'), ',' ORDER BY id) FROM stack) AS states`,
  )
  return rows[0]
}

async function login(token: string): Promise<{ cookie: string; csrfToken: string }> {
  const res = await fetch(`${api.url}/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) })
  expect(res.status).toBe(200)
  const cookie = res.headers.get('set-cookie')!.split(';')[0]!
  expect(cookie).toMatch(/^kiln_session=./)
  return { cookie, csrfToken: ((await res.json()) as { csrfToken: string }).csrfToken }
}

beforeAll(async () => {
  const all = registeredRoutes()
  routes.kiln = all.filter((r) => !r.path.startsWith('/v1/'))
  routes.heat = all.filter((r) => r.path.startsWith('/v1/'))
  const created = await api.call('POST', '/api/stacks', { body: { name: `iso-${crypto.randomBytes(3).toString('hex')}`, template: TEMPLATE('a') } })
  expect(created.status).toBe(201)
  Object.assign(target, { id: created.body.stack.id, name: created.body.stack.name, traversalId: created.body.traversalId })
  expect(await c.settle(target.id)).toBe('CREATE_COMPLETE')
  const plan = await api.call('POST', `/api/stacks/${target.id}/plans`, { body: { template: TEMPLATE('planned') } })
  expect(plan.status).toBe(201)
  target.planId = plan.body.plan.id
  const bs = await api.call('POST', '/api/stacks', { token: api.b.token, body: { name: 'b-own', template: TEMPLATE('b') } })
  expect(bs.status).toBe(201)
  bStackId = bs.body.stack.id
  expect(await c.settle(bStackId)).toBe('CREATE_COMPLETE')
}, 120_000)

describe('the route list', () => {
  test('the OpenAPI document lists exactly the Kiln routes the router serves', async () => {
    const doc = (await api.call('GET', '/api/openapi.json', { token: null })).body as { paths: Record<string, Record<string, { security?: unknown[] }>> }
    const documented = Object.entries(doc.paths).flatMap(([p, ops]) => Object.entries(ops).map(([m, op]) => `${m.toUpperCase()} ${p}${Array.isArray(op.security) && op.security.length === 0 ? ' (public)' : ''}`))
    const served = routes.kiln.map((r) => `${r.method} ${r.path}${r.public ? ' (public)' : ''}`)
    expect(documented.sort()).toEqual(served.sort())
    expect(routes.kiln.length).toBeGreaterThanOrEqual(28)
    expect(routes.heat.length).toBeGreaterThanOrEqual(31)
  })
})

describe('every route fails closed', () => {
  test('no token, malformed, unknown, expired, revoked (API and SQL), expired later: 401 on every route, through both headers, and nothing written', async () => {
    const pool = c.db.pool
    const expired = await createToken(c.db, api.a.projectId, 'expired', { role: 'admin', expiresAt: new Date(Date.now() - 60_000) })
    const lapsed = await createToken(c.db, api.a.projectId, 'lapsed', { role: 'admin' })
    const revokedApi = await createToken(c.db, api.a.projectId, 'revoked-api', { role: 'admin' })
    const revokedSql = await createToken(c.db, api.a.projectId, 'revoked-sql', { role: 'admin' })
    // each worked before it stopped working: the 401s below are about expiry and revocation
    for (const t of [lapsed, revokedApi, revokedSql]) expect((await api.call('GET', `/api/stacks/${target.id}`, { token: t.secret })).status).toBe(200)
    await pool.query(`UPDATE api_token SET expires_at = now() - interval '1 second' WHERE id = $1`, [lapsed.id])
    expect((await api.call('DELETE', `/api/tokens/${revokedApi.id}`)).status).toBe(204)
    await pool.query(`UPDATE api_token SET revoked_at = now() WHERE id = $1`, [revokedSql.id])
    const victim = await createToken(c.db, api.a.projectId, 'victim', { role: 'member' }) // what DELETE /api/tokens/{token} would revoke

    const credentials: [string, string | null][] = [
      ['none', null],
      ['malformed', 'not a token'],
      ['empty-ish', ' '],
      ['unknown', `kiln_${crypto.randomBytes(32).toString('base64url')}`],
      ['overlong', `kiln_${'x'.repeat(5000)}`],
      ['expired', expired.secret],
      ['expired later', lapsed.secret],
      ['revoked (API)', revokedApi.secret],
      ['revoked (SQL)', revokedSql.secret],
    ]
    const values = { stack: target.id, traversal: target.traversalId, plan: target.planId, token: victim.id, type: 'OS::Heat::TestResource', project: api.a.projectId, name: target.name, id: target.id, resource: 'holder', key: 'out' }
    const before = await snapshot()
    const failures: string[] = []
    let tried = 0
    for (const r of [...routes.kiln, ...routes.heat]) {
      const path = fill(r.path, values)
      for (const [label, secret] of credentials) {
        for (const via of ['x-auth-token', 'bearer'] as const) {
          if (via === 'bearer' && secret === null) continue
          const headers: Record<string, string> = secret === null ? {} : via === 'x-auth-token' ? { 'x-auth-token': secret } : { authorization: `Bearer ${secret}` }
          let body = bodyFor(r.method, r.path)
          if (r.path === '/api/session' && r.method === 'POST') body = { token: secret ?? '' } // login with the bad token itself
          const res = await api.call(r.method, path, { token: null, headers, body })
          tried++
          const where = `${label} via ${via}: ${r.method} ${path} -> ${res.status} ${res.text.slice(0, 120)}`
          // A provider's callback takes no token: its credential is the URL's signature, and this one has none.
          if (r.path.startsWith('/api/provider-callbacks/')) {
            if (res.status !== 404) failures.push(`an unsigned callback was not refused: ${where}`)
            continue
          }
          if (r.public && !(r.method === 'POST' && r.path === '/api/session')) {
            if (res.status >= 400) failures.push(`public route refused: ${where}`)
            continue
          }
          const loginBodyRejected = r.path === '/api/session' && r.method === 'POST' && secret !== null && secret.length <= 200 && res.status === 401
          const loginRejectedBySchema = r.path === '/api/session' && r.method === 'POST' && (secret === null || secret.trim() === '' || secret.length > 200) && res.status === 400
          if (res.status !== 401 && !loginBodyRejected && !loginRejectedBySchema) failures.push(where)
          if (res.status === 401) {
            // the error body says so, in the API's own format
            const code = path.startsWith('/v1/') ? res.body?.error?.type : res.body?.error?.code
            if (code !== (path.startsWith('/v1/') ? 'HTTPUnauthorized' : 'unauthorized')) failures.push(`${where}: body ${res.text.slice(0, 120)}`)
          }
          if (res.headers.get('set-cookie')) failures.push(`${where}: set a cookie`)
        }
      }
    }
    expect(failures).toEqual([])
    expect(await snapshot()).toEqual(before)
    // ... and the victim token still works: nothing was revoked by the refused DELETEs
    expect((await api.call('GET', '/api/session', { token: victim.secret })).status).toBe(200)
    expect(tried).toBeGreaterThan(800)
    console.log(`isolation: ${routes.kiln.length} Kiln + ${routes.heat.length} Heat routes x ${credentials.length} bad credentials x 2 headers = ${tried} requests, all refused`)
  })

  test('a session cookie stops working when its token is revoked or expires, or the session expires', async () => {
    const pool = c.db.pool
    const cases = {
      revoked: await createToken(c.db, api.a.projectId, 'cookie-revoked', { role: 'admin' }),
      expired: await createToken(c.db, api.a.projectId, 'cookie-expired', { role: 'admin' }),
      session: await createToken(c.db, api.a.projectId, 'cookie-session', { role: 'admin' }),
      logout: await createToken(c.db, api.a.projectId, 'cookie-logout', { role: 'admin' }),
    }
    const cookies: Record<string, { cookie: string; csrfToken: string }> = {}
    for (const [k, t] of Object.entries(cases)) {
      cookies[k] = await login(t.secret)
      expect((await api.call('GET', '/api/session', { token: null, headers: { cookie: cookies[k]!.cookie } })).status, k).toBe(200)
    }
    expect((await api.call('DELETE', `/api/tokens/${cases.revoked.id}`)).status).toBe(204)
    await pool.query(`UPDATE api_token SET expires_at = now() - interval '1 second' WHERE id = $1`, [cases.expired.id])
    await pool.query(`UPDATE session SET expires_at = now() - interval '1 second' WHERE token_id = $1`, [cases.session.id])
    const out = await api.call('DELETE', '/api/session', { token: null, headers: { cookie: cookies.logout!.cookie, 'x-csrf-token': cookies.logout!.csrfToken } })
    expect(out.status).toBe(204)
    const before = await snapshot()
    const failures: string[] = []
    for (const [k, { cookie, csrfToken }] of Object.entries(cookies)) {
      for (const r of routes.kiln.filter((x) => !x.public)) {
        const path = fill(r.path, { stack: target.id, traversal: 'current', plan: target.planId, resource: 'holder', token: cases.logout.id, type: 'OS::Heat::None' })
        const res = await api.call(r.method, path, { token: null, headers: { cookie, 'x-csrf-token': csrfToken, origin: api.url }, body: bodyFor(r.method, r.path) })
        if (res.status !== 401) failures.push(`${k}: ${r.method} ${path} -> ${res.status}`)
      }
    }
    expect(failures).toEqual([])
    expect(await snapshot()).toEqual(before)
  })
})

describe("another project's stack is indistinguishable from a missing one", () => {
  /** A response with the ids and names that differ between the two requests replaced. */
  const normal = (text: string, ...refs: string[]) => refs.reduce((t, r) => t.replaceAll(r, '<ref>').replaceAll(encodeURIComponent(r), '<ref>'), text)

  test('Kiln routes, by id and by name, with B’s token: 404 with the body of a missing stack; nothing written', async () => {
    const stackRoutes = routes.kiln.filter((r) => r.path.includes('{stack}'))
    expect(stackRoutes.length).toBeGreaterThanOrEqual(14)
    const before = await snapshot()
    const failures: string[] = []
    const missingId = crypto.randomUUID()
    const missingName = `no-such-${crypto.randomBytes(3).toString('hex')}`
    for (const r of stackRoutes) {
      for (const [theirs, missing] of [[target.id, missingId], [target.name, missingName]] as const) {
        for (const traversal of ['current', target.traversalId]) {
          const body = bodyFor(r.method, r.path)
          const a = await api.call(r.method, fill(r.path, { stack: theirs, traversal, plan: target.planId, resource: 'holder' }), { token: api.b.token, body })
          const m = await api.call(r.method, fill(r.path, { stack: missing, traversal, plan: target.planId, resource: 'holder' }), { token: api.b.token, body })
          const where = `${r.method} ${fill(r.path, { stack: theirs, traversal, plan: target.planId, resource: 'holder' })}`
          if (a.status !== 404 || m.status !== 404) failures.push(`${where}: ${a.status} (missing: ${m.status})`)
          if (normal(a.text, theirs, target.traversalId) !== normal(m.text, missing, target.traversalId)) failures.push(`${where}: ${a.text} differs from ${m.text}`)
          if (a.text.includes(target.id) && !where.includes(target.id)) failures.push(`${where}: reveals the id`)
          if (!r.path.includes('{traversal}')) break
        }
      }
    }
    // A's traversal through B's own stack
    const missingTraversal = crypto.randomUUID()
    const g = await api.call('GET', `/api/stacks/${bStackId}/traversals/${target.traversalId}/graph`, { token: api.b.token })
    const gm = await api.call('GET', `/api/stacks/${bStackId}/traversals/${missingTraversal}/graph`, { token: api.b.token })
    expect([g.status, gm.status]).toEqual([404, 404])
    expect(normal(g.text, target.traversalId)).toBe(normal(gm.text, missingTraversal))
    const ev = await api.call('GET', `/api/stacks/${bStackId}/events?traversal=${target.traversalId}`, { token: api.b.token })
    expect(ev.status).toBe(200)
    expect(ev.body.events).toEqual([])
    // B's lists and token routes show nothing of A's
    const list = await api.call('GET', '/api/stacks?limit=500', { token: api.b.token })
    expect(list.body.stacks.map((s: { id: string }) => s.id)).toEqual([bStackId])
    expect((await api.call('GET', `/api/stacks?name=${target.name}`, { token: api.b.token })).body.stacks).toEqual([])
    const tokens = await api.call('GET', '/api/tokens', { token: api.b.token })
    expect(tokens.status).toBe(200)
    const aTokens = (await c.db.pool.query(`SELECT id FROM api_token WHERE project_id = $1`, [api.a.projectId])).rows.map((r) => String(r.id))
    expect(tokens.body.tokens.filter((t: { id: string }) => aTokens.includes(t.id))).toEqual([])
    const revokeA = await api.call('DELETE', `/api/tokens/${aTokens[0]}`, { token: api.b.token })
    const revokeMissing = await api.call('DELETE', `/api/tokens/${crypto.randomUUID()}`, { token: api.b.token })
    expect([revokeA.status, revokeMissing.status]).toEqual([404, 404])
    expect((await api.call('POST', '/api/projects', { token: api.b.token, body: { name: 'by-b' } })).status).toBe(403)
    expect(failures).toEqual([])
    expect(await snapshot()).toEqual(before)
    expect((await api.call('GET', '/api/session')).status).toBe(200) // A's token survived B's attempt to revoke it
  })

  test('Heat routes with B’s token: under B’s project 404 like a missing stack; under A’s project 403 for every route; nothing written', async () => {
    const before = await snapshot()
    const failures: string[] = []
    const missingId = crypto.randomUUID()
    const missingName = `no-such-${crypto.randomBytes(3).toString('hex')}`
    let compared = 0
    for (const r of routes.heat) {
      const body = bodyFor(r.method, r.path)
      const values = (project: string, name: string, id: string) => ({ project, name, id, resource: 'holder', key: 'out', type: 'OS::Heat::None' })
      if (r.path.includes('{name}')) {
        // under B's own project path, naming A's stack (by name, by id, and name + id)
        for (const [theirs, missing] of [
          [values(api.b.projectId, target.name, target.id), values(api.b.projectId, missingName, missingId)],
          [values(api.b.projectId, target.id, target.id), values(api.b.projectId, missingId, missingId)],
        ] as const) {
          const a = await api.call(r.method, fill(r.path, theirs), { token: api.b.token, body })
          const m = await api.call(r.method, fill(r.path, missing), { token: api.b.token, body })
          compared++
          const where = `${r.method} ${fill(r.path, theirs)}`
          if (a.status !== 404 || m.status !== 404) failures.push(`${where}: ${a.status} (missing: ${m.status}) ${a.text.slice(0, 100)}`)
          if (normal(a.text, target.name, target.id) !== normal(m.text, missingName, missingId)) failures.push(`${where}: ${a.text} differs from ${m.text}`)
        }
      }
      // under A's project path: refused whatever is asked, the same for A's stack and a missing one
      const a = await api.call(r.method, fill(r.path, values(api.a.projectId, target.name, target.id)), { token: api.b.token, body })
      const m = await api.call(r.method, fill(r.path, values(api.a.projectId, missingName, missingId)), { token: api.b.token, body })
      const where = `${r.method} ${fill(r.path, values(api.a.projectId, target.name, target.id))}`
      if (a.status !== 403 || m.status !== 403) failures.push(`${where}: ${a.status} (missing: ${m.status})`)
      if (normal(a.text, target.name, target.id) !== normal(m.text, missingName, missingId)) failures.push(`${where}: ${a.text} differs from ${m.text}`)
      if (a.text.includes(target.name)) failures.push(`${where}: names the stack`)
    }
    const list = await api.call('GET', `/v1/${api.b.projectId}/stacks`, { token: api.b.token })
    expect(list.status).toBe(200)
    expect(list.body.stacks.map((s: { id: string }) => s.id)).toEqual([bStackId])
    expect(failures).toEqual([])
    expect(compared).toBeGreaterThan(40)
    expect(await snapshot()).toEqual(before)
  })
})

describe('CSRF', () => {
  test('a session cookie without the header, with a wrong one, or from a foreign Origin cannot change anything, on any route', async () => {
    const { cookie, csrfToken } = await login(api.a.token)
    const writes = routes.kiln.filter((r) => !r.public && r.method !== 'GET')
    expect(writes.length).toBeGreaterThanOrEqual(13)
    const victim = await createToken(c.db, api.a.projectId, 'csrf-victim', { role: 'member' })
    const attempts: [string, Record<string, string>][] = [
      ['no header', {}],
      ['no header, same origin', { origin: api.url }],
      ['wrong header', { 'x-csrf-token': 'wrong' }],
      ['empty header', { 'x-csrf-token': '' }],
      ["another session's header", { 'x-csrf-token': (await login(api.a.token)).csrfToken }],
      ['foreign origin', { 'x-csrf-token': csrfToken, origin: 'http://evil.example' }],
      ['null origin', { 'x-csrf-token': csrfToken, origin: 'null' }],
      ['look-alike origin', { 'x-csrf-token': csrfToken, origin: `${api.url}.evil.example` }],
    ]
    const before = await snapshot()
    const failures: string[] = []
    for (const r of writes) {
      const path = fill(r.path, { stack: target.id, traversal: 'current', plan: target.planId, resource: 'holder', token: victim.id, type: 'OS::Heat::None' })
      for (const [label, headers] of attempts) {
        const res = await api.call(r.method, path, { token: null, headers: { cookie, ...headers }, body: bodyFor(r.method, r.path) })
        if (res.status !== 403 || res.body?.error?.code !== 'csrf') failures.push(`${label}: ${r.method} ${path} -> ${res.status} ${res.text.slice(0, 100)}`)
      }
    }
    // The Heat API takes tokens only: a cookie, even with its CSRF token, is no credential there.
    for (const r of routes.heat) {
      const path = fill(r.path, { project: api.a.projectId, name: target.name, id: target.id, resource: 'holder', key: 'out', type: 'OS::Heat::None' })
      const res = await api.call(r.method, path, { token: null, headers: { cookie, 'x-csrf-token': csrfToken, origin: api.url }, body: bodyFor(r.method, r.path) })
      if (res.status !== 401) failures.push(`heat with a cookie: ${r.method} ${path} -> ${res.status}`)
    }
    expect(failures).toEqual([])
    expect(await snapshot()).toEqual(before)
    // The same cookie with its header from the same origin is allowed: the refusals above are about CSRF.
    const ok = await api.call('POST', `/api/stacks/${target.id}/check`, { token: null, headers: { cookie, 'x-csrf-token': csrfToken, origin: api.url }, body: {} })
    expect(ok.status).toBe(202)
    expect(await c.settle(target.id)).toBe('CHECK_COMPLETE')
    // and a safe method needs no header
    expect((await api.call('GET', `/api/stacks/${target.id}`, { token: null, headers: { cookie, origin: 'http://evil.example' } })).status).toBe(200)
  })
})

describe('Socket.IO', () => {
  const open: Socket[] = []
  afterAll(() => open.forEach((s) => s.close()))

  /** Connect, then subscribe to `stackId`: 'refused: …', 'joined' or 'not joined: …'. */
  function attempt(opts: Parameters<typeof connect>[1], stackId: unknown = target.id): Promise<string> {
    return new Promise<string>((resolve) => {
      const s = connect(api.url, { transports: ['websocket'], reconnection: false, forceNew: true, ...opts })
      open.push(s)
      const timer = setTimeout(() => (s.close(), resolve('timeout')), 10_000)
      s.on('connect_error', (e) => (clearTimeout(timer), s.close(), resolve(`refused: ${e.message}`)))
      s.on('connect', () =>
        s.emit('stack:subscribe', stackId as string, (ack: { ok: boolean; error?: string }) => {
          clearTimeout(timer)
          s.close()
          resolve(ack.ok ? 'joined' : `not joined: ${ack.error}`)
        }),
      )
    })
  }

  test('no credentials, malformed, unknown, expired, revoked: refused; another project: not found, like a missing stack', async () => {
    const pool = c.db.pool
    const expired = await createToken(c.db, api.a.projectId, 'sock-expired', { expiresAt: new Date(Date.now() - 1000) })
    const lapsed = await createToken(c.db, api.a.projectId, 'sock-lapsed')
    const revoked = await createToken(c.db, api.a.projectId, 'sock-revoked')
    expect(await attempt({ auth: { token: lapsed.secret } })).toBe('joined')
    expect(await attempt({ auth: { token: revoked.secret } })).toBe('joined')
    await pool.query(`UPDATE api_token SET expires_at = now() - interval '1 second' WHERE id = $1`, [lapsed.id])
    expect((await api.call('DELETE', `/api/tokens/${revoked.id}`)).status).toBe(204)
    const revokedCookie = await (async () => {
      const t = await createToken(c.db, api.a.projectId, 'sock-cookie-revoked')
      const s = await login(t.secret)
      expect((await api.call('DELETE', `/api/tokens/${t.id}`)).status).toBe(204)
      return s.cookie
    })()

    expect(await attempt({})).toBe('refused: unauthorized')
    expect(await attempt({ auth: { token: 'nope' } })).toBe('refused: unauthorized')
    expect(await attempt({ auth: { token: `kiln_${crypto.randomBytes(32).toString('base64url')}` } })).toBe('refused: unauthorized')
    expect(await attempt({ auth: { token: 12345 as unknown as string } })).toBe('refused: unauthorized')
    expect(await attempt({ auth: { token: expired.secret } })).toBe('refused: unauthorized')
    expect(await attempt({ auth: { token: lapsed.secret } })).toBe('refused: unauthorized')
    expect(await attempt({ auth: { token: revoked.secret } })).toBe('refused: unauthorized')
    expect(await attempt({ extraHeaders: { cookie: revokedCookie } })).toBe('refused: unauthorized')
    expect(await attempt({ extraHeaders: { cookie: 'kiln_session=forged' } })).toBe('refused: unauthorized')
    // another project's stack: exactly what a missing stack (or garbage) gets
    expect(await attempt({ auth: { token: api.b.token } })).toBe('not joined: not found')
    expect(await attempt({ auth: { token: api.b.token } }, crypto.randomUUID())).toBe('not joined: not found')
    expect(await attempt({ auth: { token: api.b.token } }, { $ne: null })).toBe('not joined: not found')
    expect(await attempt({ auth: { token: api.b.token } }, target.name)).toBe('not joined: not found')
    // the controls: A's token and B's own stack
    expect(await attempt({ auth: { token: api.a.token } })).toBe('joined')
    expect(await attempt({ auth: { token: api.b.token } }, bStackId)).toBe('joined')
  })

  test('a cookie-authenticated socket from a foreign Origin is refused; from Kiln’s own origin it joins', async () => {
    const { cookie } = await login(api.a.token)
    expect(await attempt({ extraHeaders: { cookie, origin: 'http://evil.example' } })).toBe('refused: unauthorized')
    expect(await attempt({ extraHeaders: { cookie, origin: 'null' } })).toBe('refused: unauthorized')
    expect(await attempt({ extraHeaders: { cookie, origin: `${api.url}.evil.example` } })).toBe('refused: unauthorized')
    expect(await attempt({ extraHeaders: { cookie, origin: api.url } })).toBe('joined')
  })

  test('a socket whose token is revoked after it connected is disconnected, and cannot come back', async () => {
    const t = await createToken(c.db, api.a.projectId, 'sock-live-revoke')
    const s = connect(api.url, { transports: ['websocket'], reconnection: false, forceNew: true, auth: { token: t.secret } })
    open.push(s)
    await new Promise<void>((resolve, reject) => (s.on('connect', () => resolve()), s.on('connect_error', reject)))
    const subscribe = () => new Promise<{ ok: boolean; error?: string }>((resolve) => s.emit('stack:subscribe', target.id, resolve))
    expect((await subscribe()).ok).toBe(true)
    const gone = new Promise<string>((resolve) => s.once('disconnect', resolve))
    expect((await api.call('DELETE', `/api/tokens/${t.id}`)).status).toBe(204)
    expect(await gone).toBe('io server disconnect')
    const back = new Promise<string>((resolve) => (s.once('connect', () => resolve('connected')), s.once('connect_error', (e) => resolve(`refused: ${e.message}`))))
    s.connect()
    expect(await back).toBe('refused: unauthorized')
    s.close()
  })

  test('B’s socket, also in its project room, receives nothing of A’s stack while A’s stack changes', async () => {
    const got: string[] = []
    const s = connect(api.url, { transports: ['websocket'], reconnection: false, forceNew: true, auth: { token: api.b.token } })
    open.push(s)
    s.onAny((event: string, payload: unknown) => got.push(`${event} ${JSON.stringify(payload)}`))
    await new Promise<void>((resolve) => s.on('connect', () => s.emit('stack:subscribe', bStackId, () => resolve())))
    // A watches its own stack (so the bridge tracks it) and changes it
    const watcher = connect(api.url, { transports: ['websocket'], reconnection: false, forceNew: true, auth: { token: api.a.token } })
    open.push(watcher)
    const seen: unknown[] = []
    watcher.on('stack:events', (m: unknown) => seen.push(m))
    await new Promise<void>((resolve) => watcher.on('connect', () => watcher.emit('stack:subscribe', target.id, () => resolve())))
    expect((await api.call('PUT', `/api/stacks/${target.id}`, { body: { template: TEMPLATE('changed') } })).status).toBe(202)
    expect(await c.settle(target.id)).toBe('UPDATE_COMPLETE')
    await c.waitFor(async () => JSON.stringify(seen).includes('UPDATE'), 10_000, "A's watcher to get the update events")
    // A round trip on B's socket: anything the server sent B before it answers has arrived by then
    // (one socket's messages keep their order), however long the delivery took.
    await new Promise<void>((resolve) => s.emit('stack:subscribe', bStackId, () => resolve()))
    expect(got.filter((g) => g.includes(target.id) || g.includes(target.name))).toEqual([])
    s.close()
    watcher.close()
  })
})

// ---- hidden parameters ----
const SECRET = `hunter2-${crypto.randomBytes(6).toString('hex')}`
const HIDDEN_TEMPLATE = (opts: { joined: boolean; failing: boolean }) => `heat_template_version: 2018-08-31
parameters:
  password:
    type: string
    hidden: true
  env_password:
    type: string
    hidden: true
  visible:
    type: string
    default: plain-value
resources:
  holder:
    type: OS::Heat::TestResource
${opts.failing ? '    depends_on: [as_number]\n' : ''}    properties:
      value: { get_param: password }
${opts.joined ? `  joined:
    type: OS::Heat::TestResource
    properties:
      value: { list_join: ['-', ['user', { get_param: password }]] }
` : ''}  url:
    type: OS::Heat::TestResource
    properties:
      value: { str_replace: { template: 'postgres://app:PW@db/app', params: { PW: { get_param: password } } } }
  from_env:
    type: OS::Heat::TestResource
    properties:
      value: { get_param: env_password }
  held:
    type: OS::Heat::Value
    properties:
      value: { list: [{ get_param: password }], map: { pw: { get_param: env_password } } }
  dependent:
    type: OS::Heat::TestResource
    properties:
      value: { get_attr: [holder, output] }
${opts.failing ? `  as_number:
    type: OS::Heat::Value
    depends_on: [url]
    properties:
      type: number
      value: { get_param: password }
` : ''}outputs:
  direct:
    value: { get_param: password }
  via_attr:
    value: { get_attr: [dependent, output] }
  url:
    value: { get_attr: [url, output] }
  list:
    value: [{ get_param: password }, { get_param: env_password }]
  held:
    value: { get_attr: [held, value] }
  plain:
    value: { get_param: visible }
`

test('a hidden parameter’s value appears in no response, socket event or log line', async () => {
  const secret = (n: number) => `${SECRET}-${n}`
  const env = (n: number) => ({ parameters: { env_password: `${SECRET}-env${n}` } })
  const created = await api.call('POST', '/api/stacks', { body: { name: 'hidden', template: HIDDEN_TEMPLATE({ joined: true, failing: false }), parameters: { password: secret(1) }, environment: env(1) } })
  expect(created.status, created.text).toBe(201)
  const id = created.body.stack.id as string
  expect(await c.settle(id)).toBe('CREATE_COMPLETE')

  // Everything from now on is also watched over the socket.
  const frames: string[] = []
  const s = connect(api.url, { transports: ['websocket'], reconnection: false, forceNew: true, auth: { token: api.a.token } })
  s.onAny((event: string, payload: unknown) => frames.push(`${event} ${JSON.stringify(payload)}`))
  await new Promise<void>((resolve) => s.on('connect', () => s.emit('stack:subscribe', id, () => resolve())))
  // an update that drops `joined` (its row, holding the first value, stays as DELETE_COMPLETE) and changes both values
  expect((await api.call('PUT', `/api/stacks/${id}`, { body: { template: HIDDEN_TEMPLATE({ joined: false, failing: false }), parameters: { password: secret(2) }, environment: env(2) } })).status).toBe(202)
  expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
  expect((await api.call('POST', `/api/stacks/${id}/check`, { body: {} })).status).toBe(202)
  expect(await c.settle(id)).toBe('CHECK_COMPLETE')
  // an update whose new resource fails converting the value to a number (the failure message would quote it), after
  // `url` took the new value and before `holder` and `dependent` are updated: they keep the previous value, which the
  // current template no longer has
  expect((await api.call('PUT', `/api/stacks/${id}`, { body: { template: HIDDEN_TEMPLATE({ joined: false, failing: true }), parameters: { password: secret(3) }, environment: env(3) } })).status).toBe(202)
  expect(await c.settle(id)).toBe('UPDATE_FAILED')
  await c.waitFor(async () => frames.some((f) => f.includes('UPDATE') && f.includes('FAILED')), 10_000, 'the failed update on the socket')

  // The values really went everywhere the test looks (stored), so finding none in responses means masking.
  const stored = JSON.stringify((await c.db.pool.query(`SELECT properties, attributes, status_reason FROM resource WHERE stack_id = $1`, [id])).rows)
  for (const n of [2, 3]) expect(stored, `value ${n} stored`).toContain(secret(n))
  expect(stored).toMatch(new RegExp(`${SECRET}-env[23]`))

  // Every GET route of the stack, each parameter filled with every value it can take.
  const traversals = (await api.call('GET', `/api/stacks/${id}/traversals`)).body.traversals.map((t: { id: string }) => t.id) as string[]
  expect(traversals.length).toBe(4)
  const resources = ['holder', 'joined', 'url', 'from_env', 'held', 'dependent', 'as_number']
  const keys = ['direct', 'via_attr', 'url', 'list', 'held', 'plain']
  const p = api.a.projectId
  const { leaks, fetched } = await sweep(api, stackUrls(api, { id, name: 'hidden', traversals, resources, keys }), [SECRET])
  expect(fetched).toBeGreaterThan(60)
  // requests that echo a template back: preview, validate (Kiln and Heat), and a rejected create quoting the value
  const echoes: [string, string, unknown][] = [
    ['POST', `/api/stacks/${id}/preview`, { existing: true }],
    ['POST', `/api/stacks/${id}/preview`, { template: HIDDEN_TEMPLATE({ joined: true, failing: false }), parameters: { password: secret(4) }, environment: env(4) }],
    ['PUT', `/v1/${p}/stacks/hidden/${id}/preview`, { parameters: { password: secret(4) } }],
    ['POST', '/api/templates/validate', { template: HIDDEN_TEMPLATE({ joined: true, failing: false }), parameters: { password: secret(5) }, environment: env(5) }],
    ['POST', `/v1/${p}/validate`, { template: HIDDEN_TEMPLATE({ joined: true, failing: false }), parameters: { password: secret(5) } }],
    ['POST', '/api/stacks', { name: 'hidden-bad', template: HIDDEN_TEMPLATE({ joined: true, failing: false }).replace('value: { get_param: password }', 'wait_secs: { get_param: password }'), parameters: { password: secret(6) }, environment: env(6) }],
    ['POST', `/v1/${p}/stacks`, { stack_name: 'hidden-bad', template: HIDDEN_TEMPLATE({ joined: true, failing: false }).replace('value: { get_param: password }', 'wait_secs: { get_param: password }'), parameters: { password: secret(6) } }],
    ['POST', '/api/templates/validate', { template: HIDDEN_TEMPLATE({ joined: true, failing: false }).replace('type: string\n    hidden: true\n  env', 'type: number\n    hidden: true\n  env'), parameters: { password: secret(7) }, environment: env(7) }],
  ]
  for (const [m, u, body] of echoes) {
    const res = await api.call(m, u, { body })
    if (res.status >= 500) leaks.push(`${m} ${u}: ${res.status}`)
    if (res.text.includes(SECRET)) leaks.push(`${m} ${u} (${res.status}): ${res.text.slice(Math.max(0, res.text.indexOf(SECRET) - 80), res.text.indexOf(SECRET) + 40)}`)
  }
  // the rejected ones were rejected (so their messages were checked), and wrote nothing
  expect((await c.db.pool.query(`SELECT count(*)::int AS n FROM stack WHERE name = 'hidden-bad'`)).rows[0].n).toBe(0)

  s.close()
  expect(frames.length, 'socket frames captured').toBeGreaterThan(10)
  for (const f of frames) if (f.includes(SECRET)) leaks.push(`socket: ${f.slice(Math.max(0, f.indexOf(SECRET) - 80), f.indexOf(SECRET) + 40)}`)
  const logs = c.workers.map((w) => w.output.join('')).join('\n')
  expect(logs).toMatch(/as_number/) // the failure was logged (debug logging is on): there is something to search
  if (logs.includes(SECRET)) leaks.push(`worker log: ${logs.slice(Math.max(0, logs.indexOf(SECRET) - 120), logs.indexOf(SECRET) + 40)}`)
  expect(leaks).toEqual([])

  // masked, not dropped: the values are replaced by ******, everything else is intact; an output made from a
  // secret is masked whole and says it is sensitive
  const shown = (await api.call('GET', `/api/stacks/${id}`)).body.stack
  expect(shown.parameters).toMatchObject({ password: '******', env_password: '******', visible: 'plain-value' })
  for (const k of ['direct', 'url', 'list', 'held', 'via_attr']) expect(shown.outputs[k], k).toEqual({ value: '******', sensitive: true })
  expect(shown.outputs.plain).toEqual({ value: 'plain-value' })
  const rows = (await api.call('GET', `/api/stacks/${id}/resources?all=1`)).body.resources as { name: string; properties: { value?: unknown } }[]
  expect(rows.find((r) => r.name === 'url')?.properties.value).toBe('******') // made from the secret: secret whole
  expect(rows.find((r) => r.name === 'holder')?.properties.value).toBe('******') // the previous value, masked too
  expect(rows.find((r) => r.name === 'from_env')?.properties.value).toBe('******')
  expect((await api.call('GET', `/api/stacks/${id}/template`)).body.environment.parameters.env_password).toBe('******')
  // asked for by name, an output shows its value: Kiln's reveal, and the Heat API's output show
  expect((await api.call('GET', `/api/stacks/${id}/outputs/url?reveal=true`)).body.output).toEqual({ key: 'url', value: `postgres://app:${secret(3)}@db/app`, sensitive: true })
  expect((await api.call('GET', `/v1/${p}/stacks/hidden/${id}/outputs/direct`)).body.output.output_value).toBe(secret(3))
}, 120_000)

// ---- secrets derived by functions ----
/** Pieces of four characters or more: each is masked wherever it stands, alone or inside other text. */
const PIECES = ['alpha', 'bravo', 'charlie'].map((w) => `${w}-${crypto.randomBytes(5).toString('hex')}`)
const DERIVED_TEMPLATE = (opts: { failing: boolean }) => `heat_template_version: 2018-08-31
parameters:
  pw:
    type: string
    hidden: true
resources:
  handle:
    type: OS::Heat::WaitConditionHandle
  db:
    type: Kiln::Postgres::Database
  env_file:
    type: Kiln::File
    properties:
      path: derived/app.env
      content:
        str_replace:
          template: "DATABASE_URL=DBURL\\nSIGNAL_TOKEN=TOKEN\\n"
          params: { DBURL: { get_attr: [db, url] }, TOKEN: { get_attr: [handle, token] } }
  long_file:
    type: Kiln::File
    properties:
      path: derived/long.txt
      content: { str_replace: { template: "${'line of text '.repeat(80)}TOKEN", params: { TOKEN: { get_attr: [handle, token] } } } }
  signal_script:
    type: Kiln::File
    properties:
      path: derived/signal.sh
      content: { list_join: ['', ["#!/bin/sh\\n", { get_attr: [handle, curl_cli] }, "\\n"]] }
  pieces:
    type: OS::Heat::Value
    properties:
      value: { str_split: [',', { get_param: pw }] }
  rejoined:
    type: OS::Heat::TestResource
    properties:
      value: { list_join: ['+', { str_split: [',', { get_param: pw }] }] }
  replaced:
    type: OS::Heat::TestResource
    properties:
      value: { str_replace: { template: 'first=A second=B', params: { A: { str_split: [',', { get_param: pw }, 0] }, B: { str_split: [',', { get_param: pw }, 1] } } } }
  repeated:
    type: OS::Heat::Value
    properties:
      value: { repeat: { for_each: { '%p%': { str_split: [',', { get_param: pw }] } }, template: { 'key-%p%': 'item-%p%' } } }
  at_runtime:
    type: OS::Heat::TestResource
    properties:
      value: { list_join: [' at ', [{ str_split: [',', { get_param: pw }, 2] }, { get_attr: [handle, endpoint] }]] }
  echo:
    type: OS::Heat::Value
    properties:
      value: { get_attr: [pieces, value] }
${opts.failing ? `  as_number:
    type: OS::Heat::Value
    properties:
      type: number
      value: { str_split: [',', { list_join: [',', [{ get_param: pw }, { get_attr: [handle, endpoint] }]] }, 1] }
` : ''}outputs:
  url:
    value: { get_attr: [db, url] }
  signal_cmd:
    value: { str_replace: { template: "CMD --data-binary '{}'", params: { CMD: { get_attr: [handle, curl_cli] } } } }
  piece:
    value: { str_split: [',', { get_param: pw }, 0] }
  echoed:
    value: { get_attr: [echo, value] }
  rejoined:
    value: { get_attr: [rejoined, output] }
  endpoint:
    value: { get_attr: [handle, endpoint] }
`
const SENSITIVE = ['url', 'signal_cmd', 'piece', 'echoed', 'rejoined']

describe('secrets derived by functions', () => {
  const stack = { id: '', frames: [] as string[], needles: [] as string[], url: '', curl: '' }

  beforeAll(async () => {
    const created = await api.call('POST', '/api/stacks', { body: { name: 'derived', template: DERIVED_TEMPLATE({ failing: false }), parameters: { pw: PIECES.join(',') } } })
    expect(created.status, created.text).toBe(201)
    stack.id = created.body.stack.id as string
    expect(await c.settle(stack.id)).toBe('CREATE_COMPLETE')
    const s = connect(api.url, { transports: ['websocket'], reconnection: false, forceNew: true, auth: { token: api.a.token } })
    s.onAny((event: string, payload: unknown) => stack.frames.push(`${event} ${JSON.stringify(payload)}`))
    await new Promise<void>((resolve) => s.on('connect', () => s.emit('stack:subscribe', stack.id, () => resolve())))
    // an update whose new resource fails converting a piece (made at run time) to a number: its message would quote it
    expect((await api.call('PUT', `/api/stacks/${stack.id}`, { body: { template: DERIVED_TEMPLATE({ failing: true }), parameters: { pw: PIECES.join(',') } } })).status).toBe(202)
    expect(await c.settle(stack.id)).toBe('UPDATE_FAILED')
    await c.waitFor(async () => stack.frames.some((f) => f.includes('as_number') && f.includes('FAILED')), 10_000, 'the failed update on the socket')
    s.close()

    // The secret attributes' values, as the database holds them: what must never show.
    const { rows } = await c.db.pool.query(`SELECT name, attributes FROM resource WHERE stack_id = $1 AND name IN ('db', 'handle') AND action = 'CREATE' AND status = 'COMPLETE'`, [stack.id])
    const db = rows.find((r) => r.name === 'db')!.attributes as Record<string, string>
    const handle = rows.find((r) => r.name === 'handle')!.attributes as Record<string, string>
    expect(db.password!.length).toBeGreaterThan(16)
    expect(handle.token).toMatch(/^kiln_sig_/)
    stack.url = db.url!
    stack.curl = handle.curl_cli!
    stack.needles = [...PIECES, db.password!, handle.token!]
  }, 120_000)

  test('a secret attribute through str_replace into a Kiln::File, and a hidden parameter through str_split, str_replace, list_join and repeat, appear in no response, socket event or log line', async () => {
    // They really went into the rows (so finding none in responses means masking), and the failure was reported.
    const stored = JSON.stringify((await c.db.pool.query(`SELECT properties, status_reason FROM resource WHERE stack_id = $1`, [stack.id])).rows)
    expect(stored).toContain(`DATABASE_URL=${stack.url}`)
    for (const n of stack.needles) expect(stored, 'stored').toContain(n)
    const failed = (await c.db.pool.query(`SELECT status_reason FROM resource WHERE stack_id = $1 AND name = 'as_number'`, [stack.id])).rows[0].status_reason as string
    expect(failed).toMatch(/^Resource CREATE failed: Value '.+' is not a number$/)

    const traversals = (await api.call('GET', `/api/stacks/${stack.id}/traversals`)).body.traversals.map((t: { id: string }) => t.id) as string[]
    const resources = ['handle', 'db', 'env_file', 'long_file', 'signal_script', 'pieces', 'rejoined', 'replaced', 'repeated', 'at_runtime', 'echo', 'as_number']
    const urls = stackUrls(api, { id: stack.id, name: 'derived', traversals, resources, keys: [...SENSITIVE, 'endpoint'] })
    // A show of the handle alone is an explicit request: it shows the handle's token (and the curl
    // command with it), as a named output show shows its value; nothing else secret.
    const handleShows = [...urls].filter((u) => u.endsWith('/resources/handle'))
    expect(handleShows.length).toBeGreaterThan(0)
    for (const u of handleShows) urls.delete(u)
    const { leaks, fetched } = await sweep(api, urls, stack.needles)
    const token = stack.needles.at(-1)!
    leaks.push(...(await sweep(api, handleShows, stack.needles.slice(0, -1))).leaks)
    let shown = 0
    for (const u of handleShows) {
      const res = await api.call('GET', u)
      if (res.status !== 200) continue
      expect(res.text, u).toContain(token)
      shown++
    }
    expect(shown).toBeGreaterThan(0)
    expect(fetched).toBeGreaterThan(60)
    for (const f of stack.frames) {
      const at = around(f, stack.needles)
      if (at !== null) leaks.push(`socket: ${at}`)
    }
    const logs = c.workers.map((w) => w.output.join('')).join('\n')
    expect(logs).toMatch(/as_number/) // the failure was logged (debug logging is on): there is something to search
    const inLogs = around(logs, stack.needles)
    if (inLogs !== null) leaks.push(`worker log: ${inLogs}`)
    expect(leaks).toEqual([])

    // masked, not dropped: what is made from a secret is masked whole; the rest is intact
    const rows = (await api.call('GET', `/api/stacks/${stack.id}/resources`)).body.resources as { name: string; statusReason: string; properties: Record<string, unknown>; attributes: Record<string, unknown> }[]
    const row = (n: string) => rows.find((r) => r.name === n)!
    expect(row('env_file').properties).toMatchObject({ path: 'derived/app.env', content: '******' })
    expect(row('signal_script').properties.content).toBe('******')
    // a long value made from a secret is stored as its digest (not a second copy) and still masked whole; with it,
    // the file's attributes made from it (its sha256 and size) are secret forms of the row
    expect(row('long_file').properties.content).toBe('******')
    const long = (await c.db.pool.query(`SELECT secret_forms, properties->>'content' AS content, attributes FROM resource WHERE stack_id = $1 AND name = 'long_file'`, [stack.id])).rows[0]
    const contentDigest = crypto.createHash('sha256').update(long.content).digest('hex')
    expect([...long.secret_forms].sort()).toEqual([`#sha256:${contentDigest}`, long.attributes.sha256, String(long.attributes.size)].sort())
    expect(long.attributes.sha256).toBe(contentDigest)
    expect(row('long_file').attributes).toEqual({ path: 'derived/long.txt', sha256: '******', size: '******' })
    expect(row('pieces').properties.value).toEqual(['******', '******', '******'])
    expect(row('echo').attributes.value).toEqual(['******', '******', '******'])
    expect(row('replaced').properties.value).toBe('******')
    expect(row('repeated').properties.value).toEqual([{ '******': '******' }, { '******': '******' }, { '******': '******' }])
    expect(row('at_runtime').properties.value).toBe('******')
    expect(row('handle').attributes).toMatchObject({ token: '******', endpoint: expect.stringContaining('/resources/handle/signal') })
    expect(row('as_number').statusReason).toBe("Resource CREATE failed: Value '******' is not a number")
  })

  test('an output made from a secret is masked in the lists (Kiln, Heat) and shown only when asked for by name, by a member of the project', async () => {
    const p = api.a.projectId
    const masked = Object.fromEntries(SENSITIVE.map((k) => [k, { value: '******', sensitive: true }]))
    expect((await api.call('GET', `/api/stacks/${stack.id}`)).body.stack.outputs).toMatchObject(masked)
    const listed = (await api.call('GET', `/api/stacks/${stack.id}/outputs`)).body.outputs
    expect(listed).toMatchObject(masked)
    expect(listed.endpoint.value).toContain('/resources/handle/signal')
    expect(listed.endpoint.sensitive).toBeUndefined()
    const heat = (await api.call('GET', `/v1/${p}/stacks/derived/${stack.id}`)).body.stack.outputs as { output_key: string; output_value: unknown }[]
    for (const k of SENSITIVE) expect(heat.find((o) => o.output_key === k)?.output_value, k).toBe('******')
    expect((await api.call('GET', `/v1/${p}/stacks/derived/${stack.id}/outputs`)).body.outputs.map((o: { output_key: string }) => o.output_key).sort()).toEqual([...SENSITIVE, 'endpoint'].sort())
    expect((await api.call('GET', `/api/stacks/${stack.id}/outputs/url`)).body.output).toEqual({ key: 'url', value: '******', sensitive: true })

    // asked for by name: Kiln's reveal (with an admin's or a member's token) and the Heat API's output show
    const member = await createToken(c.db, api.a.projectId, 'reveal-member', { role: 'member' })
    for (const token of [api.a.token, member.secret]) {
      expect((await api.call('GET', `/api/stacks/${stack.id}/outputs/url?reveal=true`, { token })).body.output).toEqual({ key: 'url', value: stack.url, sensitive: true })
    }
    expect((await api.call('GET', `/api/stacks/derived/outputs/piece?reveal=1`)).body.output.value).toBe(PIECES[0])
    expect((await api.call('GET', `/api/stacks/${stack.id}/outputs/echoed?reveal=true`)).body.output.value).toEqual(PIECES)
    expect((await api.call('GET', `/v1/${p}/stacks/derived/${stack.id}/outputs/url`)).body.output.output_value).toBe(stack.url)
    const moved = await api.call('GET', `/v1/${p}/stacks/derived/outputs/signal_cmd`)
    expect(moved.status).toBe(302)
    const to = new URL(moved.headers.get('location')!)
    expect((await api.call('GET', to.pathname + to.search)).body.output.output_value).toBe(`${stack.curl} --data-binary '{}'`)
    // a reveal is not a guess: a bad value of reveal is refused, an unknown output is not found
    const bad = await api.call('GET', `/api/stacks/${stack.id}/outputs/url?reveal=yes`)
    expect(bad.status).toBe(400)
    expect(bad.body.error.message).toMatch(/reveal/)
    expect(bad.text).not.toContain(stack.url)
    expect((await api.call('GET', `/api/stacks/${stack.id}/outputs/nope?reveal=true`)).status).toBe(404)

    // another project's member: not found, as for a stack that does not exist (Kiln and Heat)
    const missing = await api.call('GET', `/api/stacks/${crypto.randomUUID()}/outputs/url?reveal=true`, { token: api.b.token })
    for (const ref of [stack.id, 'derived']) {
      const other = await api.call('GET', `/api/stacks/${ref}/outputs/url?reveal=true`, { token: api.b.token })
      expect(other.status).toBe(404)
      expect(other.text.replace(ref, '<ref>')).toBe(missing.text.replace(/stack [^ ]+ not found/, 'stack <ref> not found'))
    }
    const heatOther = await api.call('GET', `/v1/${api.b.projectId}/stacks/derived/${stack.id}/outputs/url`, { token: api.b.token })
    expect(heatOther.status).toBe(404)
    expect(heatOther.text).not.toContain(stack.url)
    // the handle's own token signals its handle and nothing else: no reveal
    const token = stack.needles.at(-1)!
    expect((await api.call('GET', `/api/stacks/${stack.id}/outputs/url?reveal=true`, { token })).status).toBe(401)
  })
})
