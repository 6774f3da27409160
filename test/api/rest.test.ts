/**
 * Kiln's REST API over real HTTP: every route, every error class, sessions
 * with CSRF, and isolation between two projects (each stack route tried with
 * the other project's token answers exactly like a missing stack).
 */
import { io as connect } from 'socket.io-client'
import { describe, expect, test } from 'vitest'
import { gateHeld } from '../helpers/gate'
import { useKilnEnv } from '../helpers/stack-env'

const { cluster: c, api } = useKilnEnv({ cluster: { workers: 2, leaseMs: 2000 }, api: { maxBodyBytes: 64 * 1024 } })

const chain = (value: string, wait = 0) => `heat_template_version: 2018-08-31
parameters:
  secret:
    type: string
    hidden: true
    default: s3cr3t-value
resources:
  first:
    type: OS::Heat::TestResource
    properties:
      value: ${value}-1
      wait_secs: ${wait}
  second:
    type: OS::Heat::TestResource
    properties:
      value: { get_attr: [first, output] }
      wait_secs: ${wait}
outputs:
  out:
    value: { get_attr: [second, output] }
  leaked:
    value: { get_param: secret }
`

/**
 * `chain(value)` behind a gate (test/helpers/gate.ts): `first` waits for a wait condition that only a
 * signal to gate_handle releases, so an operation on it is still in progress when the next request
 * comes, however slow the machine.
 */
const gatedChain = (value: string) => `heat_template_version: 2018-08-31
resources:
  gate_handle:
    type: OS::Heat::WaitConditionHandle
  gate:
    type: OS::Heat::WaitCondition
    properties: { handle: { get_resource: gate_handle }, timeout: 3600 }
  first:
    type: OS::Heat::TestResource
    depends_on: gate
    properties:
      value: ${value}-1
  second:
    type: OS::Heat::TestResource
    properties:
      value: { get_attr: [first, output] }
`
const openGate = (id: string) => api.call('POST', `/api/stacks/${id}/resources/gate_handle/signal`, { body: {} })

async function settle(id: string) {
  return c.settle(id, 30_000)
}

describe('REST API', () => {
  test('health (up or down) and the OpenAPI document are public; everything else needs a token', async () => {
    const h = await api.call('GET', '/api/health', { token: null })
    expect(h.status).toBe(200)
    expect(h.body).toEqual({ status: 'up' })
    const details = await api.call('GET', '/api/health/details') // project A's token is an admin token
    expect(details.body.database.ok).toBe(true)
    expect(details.body.workers.live).toBeGreaterThanOrEqual(2)
    const doc = await api.call('GET', '/api/openapi.json', { token: null })
    expect(doc.body.openapi).toBe('3.1.0')
    expect(Object.keys(doc.body.paths)).toContain('/api/stacks/{stack}/traversals/{traversal}/graph')
    expect(doc.body.paths['/api/stacks'].post.requestBody.content['application/json'].schema.required).toContain('name')
    for (const [m, p] of [['GET', '/api/stacks'], ['POST', '/api/stacks'], ['GET', '/api/tokens'], ['GET', '/api/resource-types']] as const) {
      expect((await api.call(m, p, { token: null })).status, `${m} ${p}`).toBe(401)
      expect((await api.call(m, p, { token: 'kiln_not-a-real-token' })).status, `${m} ${p} bad token`).toBe(401)
    }
  })

  test('create, show, resources, events, traversals, graph, template, outputs, then update and delete', async () => {
    const created = await api.call('POST', '/api/stacks', { body: { name: 'web', template: chain('a') } })
    expect(created.status).toBe(201)
    const id = created.body.stack.id
    expect(await settle(id)).toBe('CREATE_COMPLETE')

    const shown = await api.call('GET', '/api/stacks/web')
    expect(shown.status).toBe(200)
    expect(shown.body.stack).toMatchObject({ id, name: 'web', action: 'CREATE', status: 'COMPLETE' })
    expect(shown.body.stack.parameters.secret).toBe('******')
    expect(shown.body.stack.outputs.out.value).toBe('a-1')
    expect(shown.body.stack.outputs.leaked.value).toBe('******')
    expect(JSON.stringify(shown.body)).not.toContain('s3cr3t-value')

    const res = await api.call('GET', `/api/stacks/${id}/resources`)
    expect(res.body.resources.map((r: { name: string }) => r.name)).toEqual(['first', 'second'])
    expect(res.body.resources[1]).toMatchObject({ action: 'CREATE', status: 'COMPLETE', lock: null, current: true })

    const ev = await api.call('GET', `/api/stacks/${id}/events?limit=5`)
    expect(ev.body.events).toHaveLength(5)
    const seqs = ev.body.events.map((e: { seq: number }) => e.seq)
    expect(seqs).toEqual([1, 2, 3, 4, 5])
    const rest = await api.call('GET', `/api/stacks/${id}/events?after=5`)
    expect(rest.body.events[0].seq).toBe(6)
    expect(rest.body.lastSeq).toBe(rest.body.events.at(-1).seq)

    const trav = await api.call('GET', `/api/stacks/${id}/traversals`)
    expect(trav.body.traversals).toHaveLength(1)
    expect(trav.body.traversals[0]).toMatchObject({ action: 'CREATE', outcome: 'COMPLETE', current: true })
    const tid = trav.body.traversals[0].id
    const g = await api.call('GET', `/api/stacks/${id}/traversals/${tid}/graph`)
    expect(g.body.elements.nodes).toHaveLength(2)
    expect(g.body.elements.edges).toHaveLength(1)
    const dot = await api.call('GET', `/api/stacks/${id}/traversals/current/graph?format=dot`)
    expect(dot.headers.get('content-type')).toContain('graphviz')
    expect(dot.text).toMatch(/^digraph/)
    const gml = await api.call('GET', `/api/stacks/${id}/traversals/current/graph?format=graphml`)
    expect(gml.text).toContain('<graphml')
    expect((await api.call('GET', `/api/stacks/${id}/traversals/current/graph?format=png`)).status).toBe(400)

    const tpl = await api.call('GET', `/api/stacks/${id}/template`)
    expect(tpl.body.template.resources.first.type).toBe('OS::Heat::TestResource')
    expect(tpl.body.parameters.secret).toBe('******')
    expect((await api.call('GET', `/api/stacks/${id}/outputs`)).body.outputs.out.value).toBe('a-1')

    const prev = await api.call('POST', `/api/stacks/${id}/preview`, { body: { template: chain('b') } })
    expect(prev.status).toBe(200)
    expect(prev.body.items.find((i: { name: string }) => i.name === 'first')).toMatchObject({ action: 'update', changed: ['value'] })

    const upd = await api.call('PUT', `/api/stacks/${id}`, { body: { template: chain('b') } })
    expect(upd.status).toBe(202)
    expect(await settle(id)).toBe('UPDATE_COMPLETE')
    expect((await api.call('GET', `/api/stacks/${id}/outputs`)).body.outputs.out.value).toBe('b-1')

    const patched = await api.call('PATCH', `/api/stacks/${id}`, { body: { parameters: { secret: 'other-hidden' } } })
    expect(patched.status).toBe(202)
    expect(await settle(id)).toBe('UPDATE_COMPLETE')

    const list = await api.call('GET', '/api/stacks?status=UPDATE_COMPLETE')
    expect(list.body.stacks.map((s: { name: string }) => s.name)).toContain('web')

    const del = await api.call('DELETE', `/api/stacks/${id}`)
    expect(del.status).toBe(202)
    expect(await settle(id)).toBe('DELETE_COMPLETE')
    expect((await api.call('GET', '/api/stacks/web')).status).toBe(404)
  })

  test('update while IN_PROGRESS is accepted; cancel with and without rollback', async () => {
    // The create waits at the gate, which the test opens only at the end: every request below finds
    // an operation in progress, and the gate's row held by the create's wait.
    const created = await api.call('POST', '/api/stacks', { body: { name: 'busy', template: gatedChain('a') } })
    const id = created.body.stack.id
    await gateHeld(c, id)
    const upd = await api.call('PUT', `/api/stacks/${id}`, { body: { template: gatedChain('b') } })
    expect(upd.status).toBe(202)
    expect(upd.body.superseded).toBe(created.body.traversalId)
    const cancel = await api.call('POST', `/api/stacks/${id}/cancel`, { body: { rollback: false } })
    expect(cancel.status).toBe(202)
    expect(await settle(id)).toMatch(/_FAILED$/)
    expect((await api.call('POST', `/api/stacks/${id}/cancel`, { body: { rollback: false } })).status).toBe(409)

    await api.call('PUT', `/api/stacks/${id}`, { body: { template: gatedChain('c') } })
    const rb = await api.call('POST', `/api/stacks/${id}/cancel`, { body: {} })
    expect(rb.status).toBe(202)
    expect(rb.body.action).toBe('ROLLBACK')
    expect((await openGate(id)).status).toBe(200)
    expect(await settle(id)).toMatch(/^ROLLBACK_/)
    expect((await api.call('POST', `/api/stacks/${id}/check`)).status).toBe(202)
    await settle(id)
  })

  test('bad input: 400 with path, line and column; never a 500; nothing written', async () => {
    const before = (await c.db.pool.query('SELECT count(*)::int AS n FROM stack')).rows[0].n
    const bad = 'heat_template_version: 2018-08-31\nresources:\n  a:\n    type: OS::Heat::TestResource\n    properties:\n      valu: 1\n'
    const r = await api.call('POST', '/api/stacks', { body: { name: 'bad', template: bad } })
    expect(r.status).toBe(400)
    expect(r.body.error.issues[0]).toMatchObject({ path: 'resources.a.properties.valu', line: 6, column: 7 })
    const syntax = await api.call('POST', '/api/stacks', { body: { name: 'bad', template: 'resources: [\n' } })
    expect(syntax.status).toBe(400)
    expect(syntax.body.error.issues[0].code).toBe('syntax')
    expect((await api.call('POST', '/api/stacks', { raw: '{"name": ', headers: { 'content-type': 'application/json' } })).body.error.code).toBe('invalid_json')
    expect((await api.call('POST', '/api/stacks', { body: { name: 'x', template: chain('a'), surprise: 1 } })).status).toBe(400)
    expect((await api.call('POST', '/api/stacks', { body: { name: '9bad name', template: chain('a') } })).status).toBe(400)
    expect((await api.call('POST', '/api/stacks', { body: [1, 2] })).status).toBe(400)
    expect((await api.call('POST', '/api/stacks', { body: { name: 'big', template: 'x'.repeat(70_000) } })).status).toBe(413)
    expect((await api.call('GET', '/api/stacks?limit=abc')).status).toBe(400)
    expect((await api.call('GET', '/api/stacks/no-such/events?after=-1')).status).toBe(400)
    expect((await api.call('GET', '/api/nothing-here')).status).toBe(404)
    const m = await api.call('PUT', '/api/stacks')
    expect(m.status).toBe(405)
    expect(m.headers.get('allow')).toContain('GET')
    const after = (await c.db.pool.query('SELECT count(*)::int AS n FROM stack')).rows[0].n
    expect(after).toBe(before)
  })

  test('template validate names the place; a duplicate name is a 409', async () => {
    const ok = await api.call('POST', '/api/templates/validate', { body: { template: 'heat_template_version: 2018-08-31\nparameters:\n  n:\n    type: number\nresources:\n  v:\n    type: OS::Heat::Value\n    properties:\n      value: { get_param: n }\n' } })
    expect(ok.status).toBe(200)
    expect(ok.body.parameters[0]).toMatchObject({ name: 'n', type: 'number' })
    const strict = await api.call('POST', '/api/templates/validate', { body: { strict: true, template: 'heat_template_version: 2018-08-31\nparameters:\n  n:\n    type: number\n' } })
    expect(strict.status).toBe(400)
    const cyc = await api.call('POST', '/api/templates/validate', {
      body: { template: { heat_template_version: '2018-08-31', resources: { a: { type: 'OS::Heat::None', depends_on: ['b'] }, b: { type: 'OS::Heat::None', depends_on: ['a'] } } } },
    })
    expect(cyc.status).toBe(400)
    expect(cyc.body.error.issues[0].cycles).toEqual([['a', 'b']])
    // A function Heat refuses (before its version, or a condition function outside a condition): a 400 at its place.
    const refused = await api.call('POST', '/api/templates/validate', {
      body: { template: 'heat_template_version: 2015-10-15\nresources:\n  v:\n    type: OS::Heat::Value\n    properties:\n      value: { map_merge: [{ a: 1 }] }\n  w:\n    type: OS::Heat::Value\n    properties:\n      value: { equals: [1, 1] }\n' },
    })
    expect(refused.status).toBe(400)
    expect(refused.body.error.issues.filter((i: { code: string }) => i.code === 'function').map((i: { path: string; line: number }) => [i.path, i.line])).toEqual([
      ['resources.v.properties.value.map_merge', 6],
      ['resources.w.properties.value.equals', 10],
    ])
    await api.call('POST', '/api/stacks', { body: { name: 'dup', template: chain('a') } })
    expect((await api.call('POST', '/api/stacks', { body: { name: 'dup', template: chain('a') } })).status).toBe(409)
  })

  test('resource types with their schemas', async () => {
    const list = await api.call('GET', '/api/resource-types')
    expect(list.body.resourceTypes.map((t: { name: string }) => t.name)).toEqual(expect.arrayContaining(['OS::Heat::TestResource', 'Kiln::File', 'Kiln::Postgres::Database']))
    const one = await api.call('GET', `/api/resource-types/${encodeURIComponent('OS::Heat::TestResource')}`)
    expect(one.body.properties.value).toMatchObject({ type: 'string', update_allowed: true, default: 'test_string' })
    expect((await api.call('GET', '/api/resource-types/Nope::Type')).status).toBe(404)
  })

  test('tokens: shown once, listed without secret, revocable; expired tokens fail closed', async () => {
    const t = await api.call('POST', '/api/tokens', { body: { name: 'ci' } })
    expect(t.status).toBe(201)
    const secret: string = t.body.token.secret
    expect((await api.call('GET', '/api/stacks', { token: secret })).status).toBe(200)
    const list = await api.call('GET', '/api/tokens')
    expect(JSON.stringify(list.body)).not.toContain(secret)
    expect(list.body.tokens.find((x: { id: string }) => x.id === t.body.token.id).prefix).toBe(secret.slice(0, 10))
    expect((await api.call('DELETE', `/api/tokens/${t.body.token.id}`)).status).toBe(204)
    expect((await api.call('GET', '/api/stacks', { token: secret })).status).toBe(401)
    await c.db.pool.query(`UPDATE api_token SET expires_at = now() - interval '1 minute' WHERE project_id = $1 AND name = 'expiring'`, [api.a.projectId])
    const e = await api.call('POST', '/api/tokens', { body: { name: 'expiring', expiresInDays: 1 } })
    await c.db.pool.query(`UPDATE api_token SET expires_at = now() - interval '1 second' WHERE id = $1`, [e.body.token.id])
    expect((await api.call('GET', '/api/stacks', { token: e.body.token.secret })).status).toBe(401)
    // Only admins create projects.
    expect((await api.call('POST', '/api/projects', { token: api.b.token, body: { name: 'nope' } })).status).toBe(403)
    const p = await api.call('POST', '/api/projects', { body: { name: `proj-${Date.now()}` } })
    expect(p.status).toBe(201)
    expect((await api.call('GET', '/api/session', { token: p.body.project.token.secret })).body.project.id).toBe(p.body.project.id)
  })

  test('browser sessions: HttpOnly SameSite cookie; state changes need the CSRF token and same origin', async () => {
    const login = await api.call('POST', '/api/session', { token: null, body: { token: api.a.token } })
    expect(login.status).toBe(200)
    const setCookie = login.headers.get('set-cookie')!
    expect(setCookie).toMatch(/HttpOnly/)
    expect(setCookie).toMatch(/SameSite=Strict/)
    const cookie = setCookie.split(';')[0]!
    const csrf = login.body.csrfToken as string
    expect((await api.call('GET', '/api/stacks', { token: null, headers: { cookie } })).status).toBe(200)
    const body = { name: 'from-browser', template: chain('a') }
    expect((await api.call('POST', '/api/stacks', { token: null, headers: { cookie }, body })).status).toBe(403)
    expect((await api.call('POST', '/api/stacks', { token: null, headers: { cookie, 'x-csrf-token': csrf, origin: 'http://evil.example' }, body })).status).toBe(403)
    expect((await api.call('POST', '/api/stacks', { token: null, headers: { cookie, 'x-csrf-token': 'wrong' }, body })).status).toBe(403)
    const ok = await api.call('POST', '/api/stacks', { token: null, headers: { cookie, 'x-csrf-token': csrf, origin: api.url }, body })
    expect(ok.status).toBe(201)
    expect((await api.call('DELETE', '/api/session', { token: null, headers: { cookie, 'x-csrf-token': csrf } })).status).toBe(204)
    expect((await api.call('GET', '/api/stacks', { token: null, headers: { cookie } })).status).toBe(401)
    expect((await api.call('POST', '/api/session', { token: null, body: { token: 'kiln_wrong' } })).status).toBe(401)
  })

  test("isolation: another project's token sees no stack, event, graph or template of this one", async () => {
    const created = await api.call('POST', '/api/stacks', { body: { name: 'private', template: chain('a') } })
    const id = created.body.stack.id
    await settle(id)
    const tid = created.body.traversalId
    const other = { token: api.b.token }
    const missing = await api.call('GET', '/api/stacks/00000000-0000-4000-8000-000000000000', other)
    const routes: [string, string, unknown?][] = [
      ['GET', `/api/stacks/${id}`],
      ['GET', '/api/stacks/private'],
      ['PUT', `/api/stacks/${id}`, { template: chain('x') }],
      ['PATCH', `/api/stacks/${id}`, {}],
      ['DELETE', `/api/stacks/${id}`],
      ['POST', `/api/stacks/${id}/preview`, {}],
      ['POST', `/api/stacks/${id}/cancel`, {}],
      ['POST', `/api/stacks/${id}/rollback`],
      ['POST', `/api/stacks/${id}/check`],
      ['GET', `/api/stacks/${id}/resources`],
      ['GET', `/api/stacks/${id}/events`],
      ['GET', `/api/stacks/${id}/traversals`],
      ['GET', `/api/stacks/${id}/traversals/${tid}/graph`],
      ['GET', `/api/stacks/${id}/template`],
      ['GET', `/api/stacks/${id}/outputs`],
    ]
    for (const [m, p, body] of routes) {
      const r = await api.call(m, p, { ...other, ...(body !== undefined ? { body } : {}) })
      expect(r.status, `${m} ${p}`).toBe(404)
      // Exactly what a stack that does not exist gets (only the reference the caller sent is echoed).
      expect(r.body.error.code).toBe(missing.body.error.code)
      expect(r.body.error.message).toMatch(/^stack \S+ not found$/)
      // (The echoed id is left out: a random uuid can itself contain "a-1", as in "…b03a-1e54…".)
      expect(r.text.replaceAll(id, '')).not.toContain('a-1')
    }
    expect((await api.call('GET', '/api/stacks', other)).body.stacks.map((s: { id: string }) => s.id)).not.toContain(id)
    const tokens = await api.call('GET', '/api/tokens', other)
    expect(JSON.stringify(tokens.body)).not.toContain(api.a.projectName)
    expect((await api.call('DELETE', `/api/tokens/${(await api.call('GET', '/api/tokens')).body.tokens[0].id}`, other)).status).toBe(404)
    expect((await api.call('GET', `/api/stacks/${id}`)).body.stack.status).toBe('COMPLETE')
  })

  test('pagination: marker pages through every stack exactly once', async () => {
    for (const n of ['pg1', 'pg2', 'pg3']) await api.call('POST', '/api/stacks', { body: { name: n, template: chain('p') } })
    const seen: string[] = []
    let marker: string | null = null
    do {
      const page: { body: { stacks: { name: string }[]; next: string | null } } = await api.call('GET', `/api/stacks?limit=2${marker ? `&marker=${marker}` : ''}`)
      expect(page.body.stacks.length).toBeLessThanOrEqual(2)
      seen.push(...page.body.stacks.map((s) => s.name))
      marker = page.body.next
    } while (marker)
    const all = (await api.call('GET', '/api/stacks?limit=500')).body.stacks.map((s: { name: string }) => s.name)
    expect(seen).toEqual(all)
    expect(new Set(seen).size).toBe(seen.length)
    expect((await api.call('GET', '/api/stacks?marker=garbage')).status).toBe(400)
  })

  test("Socket.IO: unauthenticated connections are refused; a stack's room admits only its project", async () => {
    // held at the gate until the socket has subscribed: the events it is sent happen after that
    const created = await api.call('POST', '/api/stacks', { body: { name: 'live', template: gatedChain('a') } })
    const id = created.body.stack.id
    const open = (token: string | null) =>
      new Promise<ReturnType<typeof connect>>((resolve, reject) => {
        const s = connect(api.url, { auth: token ? { token } : {}, transports: ['websocket'], reconnection: false })
        s.on('connect', () => resolve(s))
        s.on('connect_error', (e) => {
          s.close()
          reject(e)
        })
      })
    await expect(open(null)).rejects.toThrow('unauthorized')
    await expect(open('kiln_wrong')).rejects.toThrow('unauthorized')
    const other = await open(api.b.token)
    const refused = await other.emitWithAck('stack:subscribe', id)
    expect(refused).toEqual({ ok: false, error: 'not found' })
    const mine = await open(api.a.token)
    const events: { seq: number }[] = []
    const otherEvents: unknown[] = []
    other.on('stack:events', (m: unknown) => otherEvents.push(m))
    mine.on('stack:events', (m: { events: { seq: number }[] }) => events.push(...m.events))
    const ack = await mine.emitWithAck('stack:subscribe', id)
    expect(ack.ok).toBe(true)
    await gateHeld(c, id)
    expect((await openGate(id)).status).toBe(200)
    await settle(id)
    await c.waitFor(async () => events.length > 0, 5000, 'live events')
    const seqs = events.map((e) => e.seq)
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b))
    expect(otherEvents).toEqual([])
    mine.close()
    other.close()
  })
})

describe('hidden parameters', () => {
  test('a hidden value that breaks a property never appears in the status reason, events or API responses', async () => {
    const tpl = `heat_template_version: 2018-08-31
parameters:
  pw: { type: string, hidden: true }
resources:
  r:
    type: OS::Heat::TestResource
    properties: { wait_secs: { get_param: pw } }
`
    // The hidden value reaches wait_secs through a resource attribute, so it is only checked (and rejected) at run time.
    const created = await api.call('POST', '/api/stacks', { body: { name: 'hidden', template: tpl.replace('{ get_param: pw }', '{ get_attr: [v, value] }') + `  v:\n    type: OS::Heat::Value\n    properties: { value: { get_param: pw } }\n`, parameters: { pw: 'hunter2-secret' } } })
    expect(created.status).toBe(201)
    const id = created.body.stack.id
    expect(await settle(id)).toBe('CREATE_FAILED')
    const everything = JSON.stringify([
      (await api.call('GET', `/api/stacks/${id}`)).body,
      (await api.call('GET', `/api/stacks/${id}/resources?all=1`)).body,
      (await api.call('GET', `/api/stacks/${id}/events?limit=1000`)).body,
      (await api.call('GET', `/api/stacks/${id}/template`)).body,
      (await api.call('GET', `/v1/${api.a.projectId}/stacks/hidden/${id}`)).body,
      (await api.call('GET', `/v1/${api.a.projectId}/stacks/hidden/${id}/events`)).body,
    ])
    expect(everything).toContain('wait_secs')
    expect(everything).not.toContain('hunter2-secret')
    expect(c.workers.map((w) => w.output.join('')).join('')).not.toContain('hunter2-secret')
  })
})
