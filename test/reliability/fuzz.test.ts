/**
 * Fuzzing with fast-check: random and mutated HOT templates, parameters and
 * environments through validate, create, preview and update; and random bytes,
 * wrong types, deep nesting, huge bodies and unicode through every route.
 * Nothing may answer 5xx, the server must stay up, and a rejected request must
 * write nothing. Seeds are fixed so a failure replays; KILN_FUZZ_RUNS scales
 * the number of runs (the long version: KILN_FUZZ_RUNS=2000).
 */
import crypto from 'node:crypto'
import fc from 'fast-check'
import YAML from 'yaml'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { env } from '../../lib/env'
import { startApiServer, type ApiServer } from '../helpers/api-server'
import { TestCluster } from '../helpers/cluster'
import { testDatabase, type TestDatabase } from '../helpers/db'

const RUNS = env().KILN_FUZZ_RUNS
const MAX_BODY = 64 * 1024

let db: TestDatabase
let c: TestCluster
let api: ApiServer

beforeAll(async () => {
  db = await testDatabase()
  c = await TestCluster.start(db.url, { workers: 1, leaseMs: 2000 })
  api = await startApiServer(c, { maxBodyBytes: MAX_BODY })
})
afterAll(async () => {
  await api?.close()
  await c?.stop()
  await db?.drop()
})

/** Rows in the tables a write would touch. */
async function counts(): Promise<string> {
  const { rows } = await c.db.pool.query(
    `SELECT (SELECT count(*) FROM stack) AS s, (SELECT count(*) FROM raw_template) AS t, (SELECT count(*) FROM traversal) AS tr,
            (SELECT count(*) FROM api_token) AS k, (SELECT count(*) FROM project) AS p`,
  )
  return JSON.stringify(rows[0])
}

// ---- templates ----
const ident = fc.stringMatching(/^[a-z][a-z0-9_]{0,6}$/)
const weird = fc.oneof(fc.string({ maxLength: 12 }), fc.string({ unit: 'grapheme', maxLength: 8 }), fc.constantFrom('', ' ', '::', '../x', '\u0000', '🔥', 'a'.repeat(300)))
const name = fc.oneof({ weight: 9, arbitrary: ident }, { weight: 1, arbitrary: weird })

const templateArb = fc
  .record({
    version: fc.oneof({ weight: 6, arbitrary: fc.constantFrom('2018-08-31', '2021-04-16', 'wallaby', '2013-05-23') }, { weight: 1, arbitrary: fc.constantFrom('1999-01-01', 42, null) }),
    params: fc.dictionary(name, fc.record({ type: fc.constantFrom('string', 'number', 'boolean', 'json', 'comma_delimited_list', 'bogus'), default: fc.option(fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.boolean()), { nil: undefined }), hidden: fc.boolean() }, { requiredKeys: ['type'] }), { maxKeys: 3 }),
    resources: fc.dictionary(name, fc.record({
      type: fc.oneof({ weight: 8, arbitrary: fc.constantFrom('OS::Heat::TestResource', 'OS::Heat::None', 'OS::Heat::RandomString') }, { weight: 1, arbitrary: fc.constantFrom('Bogus::Type', 'OS::Heat::Value') }),
      value: fc.oneof(fc.string({ maxLength: 10 }), fc.integer(), fc.constant(null)),
      ref: fc.option(fc.tuple(fc.constantFrom('get_param', 'get_resource', 'get_attr', 'depends_on', 'list_join'), name, fc.nat(), fc.nat(9)), { nil: undefined }),
    }), { minKeys: 0, maxKeys: 5 }),
    extra: fc.oneof({ weight: 5, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.dictionary(weird, fc.jsonValue({ maxDepth: 2 }), { maxKeys: 2 }) }),
  })
  .map(({ version, params, resources, extra }) => {
    // (the dangle draw: 9 of 0..9 keeps the random name, so about one reference in ten is dangling)
    const res: Record<string, unknown> = {}
    const names = Object.keys(resources)
    const paramNames = Object.keys(params)
    for (const [n, r] of Object.entries(resources)) {
      const properties: Record<string, unknown> = { value: r.value }
      let depends: string[] | undefined
      if (r.ref) {
        const [fn, random, pick, dangle] = r.ref
        // mostly a real target (an earlier resource, or a parameter), sometimes a dangling or self reference
        const pool = fn === 'get_param' || fn === 'list_join' ? paramNames : names.slice(0, names.indexOf(n))
        const target = dangle === 9 || pool.length === 0 ? random : pool[pick % pool.length]!
        if (fn === 'depends_on') depends = [target]
        else if (fn === 'get_attr') properties.value = { get_attr: [target, 'output'] }
        else if (fn === 'list_join') properties.value = { list_join: [',', [{ get_param: target }, 'x']] }
        else properties.value = { [fn]: target }
      }
      res[n] = { type: r.type, properties: r.type === 'OS::Heat::TestResource' ? properties : {}, ...(depends ? { depends_on: depends } : {}) }
    }
    return { heat_template_version: version, ...(Object.keys(params).length ? { parameters: params } : {}), resources: res, ...(extra ?? {}) }
  })

/** A template as YAML or JSON text, sometimes damaged: truncated, a character inserted, indentation broken. */
const templateText = fc.tuple(templateArb, fc.constantFrom('yaml', 'json'), fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.tuple(fc.nat(), fc.constantFrom('truncate', 'insert', 'dedent')) }), fc.string({ maxLength: 3 })).map(([t, fmt, damage, junk]) => {
  let text = fmt === 'yaml' ? YAML.stringify(t) : JSON.stringify(t, null, 2)
  if (damage) {
    const at = damage[0] % Math.max(1, text.length)
    if (damage[1] === 'truncate') text = text.slice(0, at)
    else if (damage[1] === 'insert') text = text.slice(0, at) + (junk || ':') + text.slice(at)
    else text = text.replace(/\n {2}/, '\n ')
  }
  return text
})

const paramsArb = fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.dictionary(name, fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.boolean(), fc.jsonValue({ maxDepth: 1 })), { maxKeys: 3 }) })
const envArb = fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.oneof(fc.string({ maxLength: 30 }), fc.constant('parameters: {a: 1}\nresource_registry: {"My::T": OS::Heat::None}'), fc.constant('parameter_defaults: [1, 2]')) })

function parsesAsYaml(text: string): boolean {
  try {
    YAML.parse(text)
    return true
  } catch {
    return false
  }
}

describe('templates through validate, create, preview and update', () => {
  test('never a 5xx; errors say where; a rejected create or update writes nothing', async () => {
    const base = (await api.call('POST', '/api/stacks', { body: { name: 'fuzz-base', template: 'heat_template_version: 2018-08-31\nresources: {}\n' } })).body.stack.id as string
    await c.settle(base)
    let accepted = 0
    let rejected = 0
    const reasons: string[] = []
    await fc.assert(
      fc.asyncProperty(templateText, paramsArb, envArb, fc.constantFrom('validate', 'create', 'preview', 'update'), async (template, parameters, environment, route) => {
        const before = await counts()
        const body: Record<string, unknown> = { template, ...(parameters ? { parameters } : {}), ...(environment !== undefined ? { environment } : {}) }
        const res =
          route === 'validate' ? await api.call('POST', '/api/templates/validate', { body })
          : route === 'create' ? await api.call('POST', '/api/stacks', { body: { ...body, name: `fz-${crypto.randomBytes(4).toString('hex')}` } })
          : route === 'preview' ? await api.call('POST', `/api/stacks/${base}/preview`, { body })
          : await api.call('PUT', `/api/stacks/${base}`, { body })
        expect(res.status, `${route}: ${res.text.slice(0, 300)}`).toBeLessThan(500)
        if (res.status >= 400) {
          rejected++
          if (rejected < 15) reasons.push(`${route}: ${String(res.body?.error?.message).slice(0, 140)}`)
          expect(typeof res.body?.error?.code).toBe('string')
          expect(typeof res.body?.error?.message).toBe('string')
          // text that is not even YAML: the error names the line and column
          if (!parsesAsYaml(template)) expect(res.body.error.issues?.[0]?.line, res.text).toEqual(expect.any(Number))
          expect(await counts(), `${route} was rejected but wrote`).toBe(before)
        } else accepted++
        if (route === 'update' && res.status === 202) await c.settle(base, 60_000)
      }),
      { seed: 4242, numRuns: RUNS },
    )
    console.log(`fuzz templates: ${RUNS} runs, ${accepted} accepted, ${rejected} rejected; e.g.\n  ${reasons.join('\n  ')}`)
    expect(rejected).toBeGreaterThan(0)
  })
})

// ---- every route with hostile input ----
async function allRoutes(stackId: string): Promise<{ method: string; path: string }[]> {
  const doc = (await api.call('GET', '/api/openapi.json', { token: null })).body as { paths: Record<string, Record<string, unknown>> }
  const kiln = Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => ({ method: m.toUpperCase(), path: p })))
  const pj = api.a.projectId
  const heat = ['GET /stacks', 'POST /stacks', 'POST /validate', 'GET /resource_types', 'GET /stacks/{name}', 'PUT /stacks/{name}', 'PATCH /stacks/{name}', 'DELETE /stacks/{name}',
    'POST /stacks/{name}/actions', 'GET /stacks/{name}/{stack}', 'PUT /stacks/{name}/{stack}', 'PATCH /stacks/{name}/{stack}', 'PUT /stacks/{name}/{stack}/preview',
    'POST /stacks/{name}/{stack}/actions', 'GET /stacks/{name}/{stack}/resources/{resource}', 'GET /stacks/{name}/{stack}/events', 'GET /stacks/{name}/{stack}/outputs/{key}']
    .map((l) => { const [method, p] = l.split(' '); return { method: method!, path: `/v1/${pj}${p}` } })
  void stackId
  return [...kiln, ...heat]
}

const segment = fc.oneof(fc.uuid().map(String), fc.string({ maxLength: 20 }), fc.string({ unit: 'grapheme', maxLength: 6 }), fc.constantFrom('..', '%00', '%2e%2e', 'a/b', ' ', '9'.repeat(40), 'current', 'fuzz-target'))
const hostileBody = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }).map((v) => ({ raw: JSON.stringify(v), type: 'application/json' })),
  fc.uint8Array({ maxLength: 200 }).map((b) => ({ raw: Buffer.from(b).toString('latin1'), type: 'application/json' })),
  fc.constantFrom(
    { raw: '['.repeat(10_000) + ']'.repeat(10_000), type: 'application/json' },
    { raw: `{"template": ${'{"a":'.repeat(3000)}1${'}'.repeat(3000)}}`, type: 'application/json' },
    { raw: JSON.stringify({ template: 'x'.repeat(MAX_BODY + 10) }), type: 'application/json' },
    { raw: '\uFFFD\uD800 not json', type: 'application/json' },
    { raw: 'name=a&template=b', type: 'application/x-www-form-urlencoded' },
    { raw: JSON.stringify({ name: 'n', template: { heat_template_version: '2018-08-31', resources: { a: { type: ['x'] } } }, timeoutMins: -1 }), type: 'application/json' },
    { raw: JSON.stringify({ name: 123, template: 5, parameters: 'x', tags: [null] }), type: 'application/json' },
    { raw: '', type: 'text/plain' },
  ),
)

describe('every route with hostile input', () => {
  test('no 5xx, the server stays up, a rejected request writes nothing', async () => {
    const stackId = ((await api.call('POST', '/api/stacks', { body: { name: 'fuzz-target', template: 'heat_template_version: 2018-08-31\nresources: {}\n' } })).body.stack.id as string)
    const routes = await allRoutes(stackId)
    let tried = 0
    const statuses = new Map<number, number>()
    await fc.assert(
      fc.asyncProperty(fc.nat(routes.length - 1), fc.array(segment, { minLength: 4, maxLength: 4 }), hostileBody, fc.boolean(), async (ri, segs, body, withToken) => {
        const r = routes[ri]!
        let k = 0
        const path = r.path.replace(/\{(\w+)\}/g, (_, p: string) => (p === 'stack' && k++ % 2 === 0 ? stackId : encodeURIComponent(segs[k++ % 4]!)))
        const before = await counts()
        const res = await api.call(r.method, path, { token: withToken ? api.a.token : null, raw: r.method === 'GET' ? undefined : body.raw, headers: { 'content-type': body.type } })
        tried++
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
        expect(res.status, `${r.method} ${path}: ${res.text.slice(0, 200)}`).toBeLessThan(500)
        if (res.status >= 400) expect(await counts(), `${r.method} ${path} was rejected (${res.status}) but wrote`).toBe(before)
        if (Buffer.byteLength(body.raw) > MAX_BODY && r.method !== 'GET') expect(res.status, `${r.method} ${path}`).toBe(413)
      }),
      { seed: 777, numRuns: RUNS * 4 },
    )
    console.log(`fuzz routes: ${routes.length} routes, ${tried} requests, statuses ${JSON.stringify(Object.fromEntries(statuses))}`)
    expect((await api.call('GET', '/api/health', { token: null })).status).toBe(200)
  })
})
