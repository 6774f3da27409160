/**
 * The web edge: what every response carries and what no client can make the
 * server do.
 *
 *   - security headers (CSP, X-Frame-Options, nosniff, Referrer-Policy) on
 *     REST, Heat, error and Socket.IO responses;
 *   - the public health check says up or down and nothing about the machine;
 *     the details are for admin tokens;
 *   - Heat's redirects and links name the configured public URL, whatever Host
 *     the request carried;
 *   - every /v1 error is Heat's error body, a 5xx included, with no stack trace;
 *   - failed token attempts are limited per client address (REST, Heat, the
 *     login form, the socket handshake), successful ones never;
 *   - a socket is closed when its token is revoked or its session ended
 *     through any web process, when its credential expires, and when a
 *     revocation went unannounced while the listener was away.
 */
import http from 'node:http'
import { io as connect, type Socket } from 'socket.io-client'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createToken } from '../../lib/auth/tokens'
import { createDb } from '../../lib/db/client'
import { startApiServer, type ApiServer } from '../helpers/api-server'
import { useKilnEnv } from '../helpers/stack-env'

/** Two web processes on one database, as behind a load balancer: the env's `api` and `other`. */
const { db, cluster: c, api } = useKilnEnv({ cluster: { workers: 1, leaseMs: 2000 } })
let other: ApiServer
const sockets: Socket[] = []

beforeAll(async () => {
  other = await startApiServer(c)
})
afterAll(async () => {
  for (const s of sockets) s.close()
  await other?.close()
})

const TEMPLATE = (value: string, wait = 0) => `heat_template_version: 2018-08-31
resources:
  first:
    type: OS::Heat::TestResource
    properties: { value: ${value}, wait_secs: ${wait} }
  second:
    type: OS::Heat::TestResource
    properties: { value: { get_attr: [first, output] }, wait_secs: ${wait} }
`

/** A request through node:http, where the Host header and the source address are the test's to choose. */
function request(
  base: string,
  method: string,
  path: string,
  o: { headers?: Record<string, string>; body?: unknown; from?: string } = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string; body: any }> {
  const u = new URL(path, base)
  const payload = o.body === undefined ? undefined : JSON.stringify(o.body)
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, path: u.pathname + u.search, method, localAddress: o.from, headers: { ...(payload ? { 'content-type': 'application/json' } : {}), ...o.headers } },
      (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (d: string) => (text += d))
        res.on('end', () => {
          let body: unknown
          try {
            body = text ? JSON.parse(text) : null
          } catch {
            body = null
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body })
        })
      },
    )
    req.on('error', reject)
    req.end(payload)
  })
}

function socketFor(base: string, opts: Parameters<typeof connect>[1]): Socket {
  const s = connect(base, { transports: ['websocket'], reconnection: false, forceNew: true, ...opts })
  sockets.push(s)
  return s
}

/** Connect: 'connected' or the refusal's message. */
const handshake = (s: Socket) =>
  new Promise<string>((resolve) => {
    s.once('connect', () => resolve('connected'))
    s.once('connect_error', (e) => resolve(`refused: ${e.message}`))
  })

const subscribe = (s: Socket, stackId: string) => new Promise<{ ok: boolean; error?: string }>((resolve) => s.emit('stack:subscribe', stackId, resolve))
/** Resolves when `s` is sent the stack event of an update's end. */
const updateSeenBy = (s: Socket) =>
  new Promise<void>((resolve) => {
    const on = (m: { events: { kind: string; action: string | null; status: string | null }[] }) => {
      if (!m.events.some((e) => e.kind === 'stack' && e.action === 'UPDATE' && e.status === 'COMPLETE')) return
      s.off('stack:events', on)
      resolve()
    }
    s.on('stack:events', on)
  })
const disconnected = (s: Socket) => new Promise<string>((resolve) => s.once('disconnect', (reason) => resolve(reason)))

describe('security headers', () => {
  const expectSecure = (h: Headers | http.IncomingHttpHeaders, where: string) => {
    const get = (k: string) => (h instanceof Headers ? h.get(k) : (h[k] as string | undefined)) ?? null
    expect(get('x-frame-options'), where).toBe('DENY')
    expect(get('x-content-type-options'), where).toBe('nosniff')
    expect(get('referrer-policy'), where).toBe('no-referrer')
    expect(get('content-security-policy'), where).toContain("frame-ancestors 'none'")
    expect(get('content-security-policy'), where).toContain("default-src 'none'")
  }

  test('on REST and Heat answers, their errors, and Socket.IO', async () => {
    const p = `/v1/${api.a.projectId}`
    for (const [m, path, token] of [
      ['GET', '/api/health', null],
      ['GET', '/api/stacks', undefined],
      ['GET', '/api/stacks', 'kiln_wrong'],
      ['GET', '/api/no-such-route', undefined],
      ['DELETE', '/api/health', undefined],
      ['GET', `${p}/stacks`, undefined],
      ['GET', `${p}/stacks/missing`, undefined],
      ['GET', `${p}/stacks`, null],
    ] as const) {
      const res = await api.call(m, path, { token })
      expectSecure(res.headers, `${m} ${path} (${res.status})`)
    }
    // Socket.IO's own HTTP answer (the polling handshake)
    const res = await request(api.url, 'GET', '/socket.io/?EIO=4&transport=polling')
    expect(res.status).toBe(200)
    expectSecure(res.headers, 'socket.io polling')
  })
})

describe('health', () => {
  test('public: up or down, nothing about the machine; the details only for admin tokens', async () => {
    const pub = await api.call('GET', '/api/health', { token: null })
    expect(pub.status).toBe(200)
    expect(pub.body).toEqual({ status: 'up' })
    const workers = (await c.db.pool.query(`SELECT hostname, pid FROM worker WHERE stopped_at IS NULL`)).rows
    const version = (await c.db.pool.query(`SELECT current_setting('server_version') AS v`)).rows[0].v as string
    for (const w of workers) {
      expect(pub.text).not.toContain(w.hostname)
      expect(pub.text).not.toContain(String(w.pid))
    }
    expect(pub.text).not.toContain(version)
    // a member token (project B) gets nothing more, and no token gets nothing at all
    expect((await api.call('GET', '/api/health/details', { token: api.b.token })).status).toBe(403)
    expect((await api.call('GET', '/api/health/details', { token: null })).status).toBe(401)
    const admin = await api.call('GET', '/api/health/details') // project A's token is an admin token
    expect(admin.status).toBe(200)
    expect(admin.body.database).toMatchObject({ ok: true, server: `PostgreSQL ${version}` })
    expect(admin.body.workers.list.map((w: { pid: number }) => w.pid)).toEqual(expect.arrayContaining(workers.map((w) => w.pid)))
  })

  test('down when the database is gone: 503 and still nothing more', async () => {
    const gone = createDb(db.url, { max: 1 })
    const down = await startApiServer(c, { db: gone })
    try {
      await gone.close()
      const res = await down.call('GET', '/api/health', { token: null })
      expect(res.status).toBe(503)
      expect(res.body).toEqual({ status: 'down' })
    } finally {
      await down.close()
    }
  })
})

describe('Heat API edge', () => {
  test('the stack redirect and the links name the public URL, never the Host header', async () => {
    const p = `/v1/${api.a.projectId}`
    const created = await api.call('POST', `${p}/stacks`, { body: { stack_name: 'hosted', template: TEMPLATE('h') } })
    expect(created.status).toBe(201)
    const id = created.body.stack.id as string
    for (const host of ['evil.example', 'evil.example:8443', `[::1]:${new URL(api.url).port}`]) {
      const res = await request(api.url, 'GET', `${p}/stacks/hosted`, { headers: { host, 'x-auth-token': api.a.token } })
      expect(res.status, host).toBe(302)
      expect(res.headers.location, host).toBe(`${api.url}${p}/stacks/hosted/${id}`)
      const list = await request(api.url, 'GET', `${p}/stacks`, { headers: { host, 'x-auth-token': api.a.token } })
      expect(list.status, host).toBe(200)
      expect(list.text, host).not.toContain('evil.example')
      expect(list.body.stacks[0].links[0].href.startsWith(`${api.url}/`), host).toBe(true)
    }
    // a Host that makes no URL (credentials in it): refused in Heat's format, repeating nothing of it
    const odd = await request(api.url, 'GET', `${p}/stacks/hosted`, { headers: { host: '127.0.0.1:1@evil.example', 'x-auth-token': api.a.token } })
    expect(odd.status).toBe(400)
    expect(odd.body).toMatchObject({ code: 400, title: 'Bad Request', error: { type: 'HTTPBadRequest' } })
    expect(odd.text).not.toContain('evil')
    expect(odd.headers['x-frame-options']).toBe('DENY')
  })

  test("every /v1 error is Heat's body: 405, and a 5xx without a stack trace or a server path", async () => {
    const p = `/v1/${api.a.projectId}`
    const wrongMethod = await api.call('PATCH', `${p}/stacks`, { body: {} })
    expect(wrongMethod.status).toBe(405)
    expect(wrongMethod.body).toMatchObject({ code: 405, title: 'Method Not Allowed', error: { type: 'HTTPMethodNotAllowed', traceback: null } })
    expect(wrongMethod.body.error.message).toMatch(/use GET, POST/)
    expect(wrongMethod.headers.get('allow')).toBe('GET, POST')

    // A web process whose database went away: every route fails inside, unexpectedly.
    const gone = createDb(db.url, { max: 1 })
    const broken = await startApiServer(c, { db: gone })
    try {
      await gone.close()
      const heat = await broken.call('GET', `/v1/${broken.a.projectId}/stacks`, { token: broken.a.token })
      expect(heat.status).toBe(500)
      expect(heat.body).toEqual({
        code: 500,
        title: 'Internal Server Error',
        explanation: 'The server has either erred or is incapable of performing the requested operation.',
        error: { message: 'internal error; the details are in the server log', type: 'HTTPInternalServerError', traceback: null },
      })
      const kiln = await broken.call('GET', '/api/stacks', { token: broken.a.token })
      expect(kiln.status).toBe(500)
      expect(kiln.body).toEqual({ error: { code: 'internal', message: 'internal error; the details are in the server log' } })
      for (const text of [heat.text, kiln.text]) expect(text).not.toMatch(/\bat |\.ts\b|\/lib\/|node_modules|Error:/)
      // the details went to the log
      expect(broken.logs.join('\n')).toMatch(/GET \/v1\/.*\/stacks: /)
    } finally {
      await broken.close()
    }
  })
})

describe('failed token attempts', () => {
  test('after the allowance, an address gets 429 for any token, on every way in; a valid token from another address works; successes are never limited', async () => {
    const limited = await startApiServer(c, { authFailuresPerMinute: 5 })
    try {
      const p = `/v1/${limited.a.projectId}`
      const wellFormed = `kiln_${'A'.repeat(43)}`
      // 127.0.0.2 spends its allowance on the REST API
      for (let i = 0; i < 5; i++) {
        const res = await request(limited.url, 'GET', '/api/stacks', { from: '127.0.0.2', headers: { 'x-auth-token': `kiln_wrong-${i}` } })
        expect(res.status, `attempt ${i + 1}`).toBe(401)
      }
      const refused = await request(limited.url, 'GET', '/api/stacks', { from: '127.0.0.2', headers: { 'x-auth-token': wellFormed } })
      expect(refused.status).toBe(429)
      expect(refused.body.error.code).toBe('too_many_requests')
      const retryAfter = Number(refused.headers['retry-after'])
      expect(retryAfter).toBeGreaterThanOrEqual(1)
      expect(retryAfter).toBeLessThanOrEqual(60)
      // unchecked while limited: even the right token (a 200 against a 429 would still tell right from wrong)
      expect((await request(limited.url, 'GET', '/api/stacks', { from: '127.0.0.2', headers: { authorization: `Bearer ${limited.a.token}` } })).status).toBe(429)
      // ... on the Heat API (in Heat's body), the login form and the socket handshake too
      const heat = await request(limited.url, 'GET', `${p}/stacks`, { from: '127.0.0.2', headers: { 'x-auth-token': wellFormed } })
      expect(heat.status).toBe(429)
      expect(heat.body).toMatchObject({ code: 429, title: 'Too Many Requests', error: { type: 'HTTPTooManyRequests' } })
      expect(heat.headers['retry-after']).toBeDefined()
      const login = await request(limited.url, 'POST', '/api/session', { from: '127.0.0.2', body: { token: limited.a.token } })
      expect(login.status).toBe(429)
      expect(login.headers['set-cookie']).toBeUndefined()
      expect(await handshake(socketFor(limited.url, { auth: { token: limited.a.token }, localAddress: '127.0.0.2' } as never))).toBe('refused: too many failed authentication attempts')

      // another address with a valid token: unaffected, through every way in
      expect((await request(limited.url, 'GET', '/api/stacks', { from: '127.0.0.1', headers: { 'x-auth-token': limited.a.token } })).status).toBe(200)
      expect((await request(limited.url, 'GET', `${p}/stacks`, { from: '127.0.0.1', headers: { 'x-auth-token': limited.a.token } })).status).toBe(200)
      expect(await handshake(socketFor(limited.url, { auth: { token: limited.a.token }, localAddress: '127.0.0.1' } as never))).toBe('connected')
      // successes consume nothing: many more than the allowance, all answered
      for (let i = 0; i < 12; i++) expect((await request(limited.url, 'GET', '/api/session', { from: '127.0.0.3', headers: { 'x-auth-token': limited.a.token } })).status).toBe(200)

      // failed logins and failed socket handshakes count like failed requests
      for (let i = 0; i < 5; i++) expect((await request(limited.url, 'POST', '/api/session', { from: '127.0.0.4', body: { token: `kiln_wrong-${i}` } })).status).toBe(401)
      expect((await request(limited.url, 'GET', '/api/stacks', { from: '127.0.0.4', headers: { 'x-auth-token': limited.a.token } })).status).toBe(429)
      for (let i = 0; i < 5; i++) expect(await handshake(socketFor(limited.url, { auth: { token: `kiln_wrong-${i}` }, localAddress: '127.0.0.5' } as never))).toBe('refused: unauthorized')
      expect((await request(limited.url, 'GET', '/api/stacks', { from: '127.0.0.5', headers: { 'x-auth-token': limited.a.token } })).status).toBe(429)

      // each burst logged once, not once per refused request
      const lines = limited.logs.filter((l) => l.includes('failed credential attempts'))
      expect(lines.filter((l) => l.includes('127.0.0.2'))).toHaveLength(1)
      expect(lines.filter((l) => l.includes('127.0.0.4'))).toHaveLength(1)
      expect(lines.filter((l) => l.includes('127.0.0.5'))).toHaveLength(1)
      expect(lines).toHaveLength(3)
    } finally {
      await limited.close()
    }
  })
})

describe('a socket lives as long as its credential', () => {
  test('revoked through the other web process: the socket is disconnected and gets no more events; reconnecting is refused', async () => {
    const created = await api.call('POST', '/api/stacks', { body: { name: 'followed', template: TEMPLATE('a') } })
    expect(created.status).toBe(201)
    const stackId = created.body.stack.id as string
    expect(await c.settle(stackId)).toBe('CREATE_COMPLETE')

    const t = await createToken(c.db, api.a.projectId, 'to-revoke')
    // both sockets on `other`; the revocation goes through `api`
    const victim = socketFor(other.url, { auth: { token: t.secret } })
    const control = socketFor(other.url, { auth: { token: api.a.token } })
    // Both handshakes are listened for at once: either may finish first (awaiting the victim's
    // before listening for the control's missed a control that connected first, and waited forever).
    expect(await Promise.all([handshake(victim), handshake(control)])).toEqual(['connected', 'connected'])
    expect((await subscribe(victim, stackId)).ok).toBe(true)
    expect((await subscribe(control, stackId)).ok).toBe(true)
    let victimFrames = 0
    victim.on('stack:events', () => victimFrames++)

    // events reach both while the token is valid
    const bothSee = Promise.all([updateSeenBy(victim), updateSeenBy(control)])
    expect((await api.call('PUT', `/api/stacks/${stackId}`, { body: { template: TEMPLATE('b') } })).status).toBe(202)
    await bothSee

    const gone = disconnected(victim)
    expect((await api.call('DELETE', `/api/tokens/${t.id}`)).status).toBe(204)
    expect(await gone).toBe('io server disconnect')
    const framesAtDisconnect = victimFrames

    // the stack goes on changing: the control socket sees it, the revoked one nothing
    const controlSees = updateSeenBy(control)
    expect((await api.call('PUT', `/api/stacks/${stackId}`, { body: { template: TEMPLATE('c') } })).status).toBe(202)
    await controlSees
    expect(victimFrames).toBe(framesAtDisconnect)
    expect(victim.connected).toBe(false)
    victim.connect()
    expect(await handshake(victim)).toBe('refused: unauthorized')
  })

  test('a session socket closes when the session logs out, or its token is revoked, through the other web process', async () => {
    const login = async (token: string) => {
      const res = await fetch(`${api.url}/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) })
      expect(res.status).toBe(200)
      return { cookie: res.headers.get('set-cookie')!.split(';')[0]!, csrf: ((await res.json()) as { csrfToken: string }).csrfToken }
    }
    const t = await createToken(c.db, api.a.projectId, 'session-owner')
    const [loggingOut, revokedWithToken, bystander] = [await login(t.secret), await login(t.secret), await login(api.a.token)]
    const open = async (s: { cookie: string }) => {
      const sock = socketFor(other.url, { extraHeaders: { cookie: s.cookie, origin: other.url } })
      expect(await handshake(sock)).toBe('connected')
      return sock
    }
    const [s1, s2, s3] = [await open(loggingOut), await open(revokedWithToken), await open(bystander)]

    const first = disconnected(s1)
    const out = await fetch(`${api.url}/api/session`, { method: 'DELETE', headers: { cookie: loggingOut.cookie, 'x-csrf-token': loggingOut.csrf } })
    expect(out.status).toBe(204)
    expect(await first).toBe('io server disconnect')
    expect(s2.connected).toBe(true) // another session of the same token stays

    const second = disconnected(s2)
    expect((await api.call('DELETE', `/api/tokens/${t.id}`)).status).toBe(204)
    expect(await second).toBe('io server disconnect')
    // the bystander's session is untouched: it still subscribes
    const stack = await c.db.pool.query(`SELECT id FROM stack WHERE project_id = $1 LIMIT 1`, [api.a.projectId])
    expect((await subscribe(s3, String(stack.rows[0].id))).ok).toBe(true)
  })

  test('a socket closes when its token expires', async () => {
    // The socket opens only if its handshake ends before the token does; on a busy machine a handshake
    // can outlast a short life and is then rightly refused. So the life doubles until a handshake fits
    // in it: the close at expiry is asserted every time, never skipped.
    for (let lifeMs = 1500; ; lifeMs *= 2) {
      const expiresAt = new Date(Date.now() + lifeMs)
      const t = await createToken(c.db, api.a.projectId, `short-lived-${lifeMs}`, { expiresAt })
      const s = socketFor(api.url, { auth: { token: t.secret } })
      // Listened for from the start: the close can arrive right behind the connect.
      const closed = disconnected(s)
      const opened = await handshake(s)
      if (opened !== 'connected' && Date.now() >= expiresAt.getTime()) continue
      expect(opened).toBe('connected')
      expect(await closed).toBe('io server disconnect')
      return
    }
  })

  test('a revocation made while the listener was away (unannounced) closes the socket when the listener is back', async () => {
    const t = await createToken(c.db, api.a.projectId, 'revoked-quietly')
    const s = socketFor(api.url, { auth: { token: t.secret } })
    expect(await handshake(s)).toBe('connected')
    const gone = disconnected(s)
    // by SQL: no NOTIFY; then the listeners lose their connections and reconnect
    await c.db.pool.query(`UPDATE api_token SET revoked_at = now() WHERE id = $1`, [t.id])
    const killed = await c.db.pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'kiln-web-revocations' AND datname = current_database()`)
    expect(killed.rowCount).toBeGreaterThanOrEqual(1)
    expect(await gone).toBe('io server disconnect')
  })
})
