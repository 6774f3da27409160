/**
 * The routes the live view and the history read besides the graph and the
 * events: one traversal with its rows' types (`current` included, also after a
 * cancel left the stack without one), the template a past traversal ran with
 * (hidden values masked), one resource row, the names of the workers its
 * events name, the stack
 * without its outputs, and events in pages of up to 5,000. Another project's
 * stack answers like a missing one on each.
 */
import http from 'node:http'
import zlib from 'node:zlib'
import { describe, expect, test } from 'vitest'
import { gateHeld } from '../helpers/gate'
import { useKilnEnv } from '../helpers/stack-env'

const { cluster: c, api } = useKilnEnv({ cluster: { workers: 2, leaseMs: 2000 } })

/** With `gated`, `first` waits behind a gate (test/helpers/gate.ts) that only the test's signal opens. */
const template = (value: string, gated = false) => `heat_template_version: 2018-08-31
parameters:
  secret:
    type: string
    hidden: true
    default: s3cr3t-${value}
resources:
${gated ? GATE : ''}  first:
    type: OS::Heat::TestResource
${gated ? '    depends_on: gate\n' : ''}    properties:
      value: { get_param: secret }
  second:
    type: OS::Heat::None
    depends_on: [first]
outputs:
  out:
    value: { get_attr: [first, output] }
`

const GATE = `  gate_handle:
    type: OS::Heat::WaitConditionHandle
  gate:
    type: OS::Heat::WaitCondition
    properties: { handle: { get_resource: gate_handle }, timeout: 3600 }
`

describe('live view reads', () => {
  let id = ''
  let first = ''

  test('one traversal with the type of every row; `current` is the running or the latest one', async () => {
    const created = await api.call('POST', '/api/stacks', { body: { name: 'live-reads', template: template('a') } })
    expect(created.status).toBe(201)
    id = created.body.stack.id
    first = created.body.traversalId
    await c.settle(id)
    const t = await api.call('GET', `/api/stacks/${id}/traversals/${first}`)
    expect(t.status).toBe(200)
    expect(t.body.traversal).toMatchObject({ id: first, action: 'CREATE', outcome: 'COMPLETE', current: true, nodeCount: expect.any(Number) })
    const rows = await c.rows(id)
    expect(t.body.traversal.types).toEqual({
      'OS::Heat::TestResource': rows.filter((r) => r.name === 'first').map((r) => r.id),
      'OS::Heat::None': rows.filter((r) => r.name === 'second').map((r) => r.id),
    })
    expect((await api.call('GET', `/api/stacks/${id}/traversals/current`)).body.traversal.id).toBe(first)
    // the current traversal's events and graph, each naming the traversal it resolved (the live view's first load)
    const ev = await api.call('GET', `/api/stacks/${id}/events?after=0&traversal=current`)
    expect(ev.body.traversalId).toBe(first)
    expect(ev.body.events.length).toBeGreaterThan(0)
    expect(ev.body.events.every((e: { traversalId: string }) => e.traversalId === first)).toBe(true)
    expect((await api.call('GET', `/api/stacks/${id}/traversals/current/graph`)).body.traversalId).toBe(first)
    // anything else that is not a traversal id names no traversal
    expect((await api.call('GET', `/api/stacks/${id}/events?after=0&traversal=latest`)).status).toBe(404)
  })

  test('after a cancel without rollback the stack has no current traversal; `current` is the cancelled one', async () => {
    // held at the gate until the test has cancelled it
    const upd = await api.call('PUT', `/api/stacks/${id}`, { body: { template: template('b', true) } })
    expect(upd.status).toBe(202)
    await gateHeld(c, id)
    expect((await api.call('POST', `/api/stacks/${id}/cancel`, { body: { rollback: false } })).status).toBe(202)
    expect((await c.stack(id)).currentTraversalId).toBeNull()
    const t = await api.call('GET', `/api/stacks/${id}/traversals/current`)
    expect(t.body.traversal).toMatchObject({ id: upd.body.traversalId, outcome: 'CANCELLED', current: false })
    // no current traversal: its events are none, and the answer says so
    const ev = await api.call('GET', `/api/stacks/${id}/events?after=0&traversal=current`)
    expect(ev.body).toMatchObject({ traversalId: null, events: [] })
    // the cancelled update's wait is still in flight: let it finish before the next reads
    expect((await api.call('POST', `/api/stacks/${id}/resources/gate_handle/signal`, { body: {} })).status).toBe(200)
    await c.waitFor(async () => (await c.rows(id)).every((r) => r.engine_id === null), 30_000, 'the in-flight wait to finish')
  })

  test('big answers go gzipped to a client that accepts gzip, as they are to one that does not; small ones as they are', async () => {
    const get = (path: string, encoding: string) =>
      new Promise<{ headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
        http.get(`${api.url}${path}`, { headers: { 'x-auth-token': api.a.token, 'accept-encoding': encoding } }, (res) => {
          const chunks: Buffer[] = []
          res.on('data', (c: Buffer) => chunks.push(c)).on('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks) })).on('error', reject)
        }).on('error', reject)
      })
    // the events of the first traversal: a few KB of JSON
    const path = `/api/stacks/${id}/events?after=0`
    const plain = await get(path, 'identity')
    expect(plain.headers['content-encoding']).toBeUndefined()
    expect(plain.body.length).toBeGreaterThan(2048)
    const zipped = await get(path, 'gzip, deflate')
    expect(zipped.headers['content-encoding']).toBe('gzip')
    expect(zipped.headers.vary).toMatch(/Accept-Encoding/)
    expect(zipped.body.length).toBeLessThan(plain.body.length / 2)
    expect(JSON.parse(zlib.gunzipSync(zipped.body).toString())).toEqual(JSON.parse(plain.body.toString()))
    // gzip refused by q=0: as it is
    expect((await get(path, 'gzip;q=0, identity')).headers['content-encoding']).toBeUndefined()
    // a small answer is not worth it
    const small = await get(`/api/stacks/${id}/outputs`, 'gzip')
    expect(small.body.length).toBeLessThan(2048)
    expect(small.headers['content-encoding']).toBeUndefined()
  })

  test("a past traversal's template: its text as written, its parameters with hidden values masked", async () => {
    const t = await api.call('GET', `/api/stacks/${id}/traversals/${first}/template`)
    expect(t.status).toBe(200)
    expect(t.body.source).toContain('s3cr3t-a')
    expect(t.body.parameters).toEqual({ secret: '******' })
    expect(JSON.stringify(t.body.environment)).not.toContain('s3cr3t')
  })

  test('one resource row by id; unknown ids and non-numbers are 404', async () => {
    const row = (await c.rows(id)).find((r) => r.name === 'first')!
    const r = await api.call('GET', `/api/stacks/${id}/resources/${row.id}`)
    expect(r.status).toBe(200)
    expect(r.body.resource).toMatchObject({ id: row.id, name: 'first', type: 'OS::Heat::TestResource' })
    for (const bad of ['999999', 'abc', '1.5', '99999999999']) {
      const res = await api.call('GET', `/api/stacks/${id}/resources/${bad}`)
      expect([res.status, res.body.error.code]).toEqual([404, 'not_found'])
    }
  })

  test('the workers its events name, as hostname:pid; only ids asked for; bad ids refused', async () => {
    const { rows } = await c.db.pool.query(`SELECT DISTINCT data->>'worker' AS id FROM event WHERE stack_id = $1 AND data ? 'worker'`, [id])
    const named = rows.map((r) => String(r.id))
    expect(named.length).toBeGreaterThan(0)
    const w = await api.call('GET', `/api/stacks/${id}/workers?ids=${named.join(',')}`)
    expect(w.status).toBe(200)
    const pidOf = (wid: string) => c.workers.find((x) => x.id === wid)!.proc.pid
    expect(w.body.workers.map((x: { id: string; name: string }) => [x.id, x.name]).sort()).toEqual(named.map((wid) => [wid, expect.stringMatching(new RegExp(`:${pidOf(wid)}$`))]).sort())
    // nothing asked, nothing told (not the list of every worker of the installation)
    expect((await api.call('GET', `/api/stacks/${id}/workers`)).body.workers).toEqual([])
    const bad = await api.call('GET', `/api/stacks/${id}/workers?ids=not-a-uuid`)
    expect([bad.status, bad.body.error.message]).toEqual([400, 'ids: not-a-uuid is not a worker id'])
    const many = Array.from({ length: 101 }, () => named[0]).join(',')
    expect((await api.call('GET', `/api/stacks/${id}/workers?ids=${many}`)).body.error.message).toBe('ids: at most 100 worker ids')
  })

  test('the stack without its outputs (outputs=0); any other value of outputs is refused', async () => {
    const full = await api.call('GET', `/api/stacks/${id}`)
    const lean = await api.call('GET', `/api/stacks/${id}?outputs=0`)
    expect(full.body.stack.outputs).toBeDefined()
    expect(lean.status).toBe(200)
    expect(lean.body.stack).not.toHaveProperty('outputs')
    const { outputs: _, ...rest } = full.body.stack
    expect(lean.body.stack).toEqual(rest)
    const bad = await api.call('GET', `/api/stacks/${id}?outputs=no`)
    expect([bad.status, bad.body.error.message]).toEqual([400, 'outputs must be 0 or 1'])
  })

  test('events in pages of up to 5,000; more is refused naming the limit', async () => {
    expect((await api.call('GET', `/api/stacks/${id}/events?limit=5000`)).status).toBe(200)
    const bad = await api.call('GET', `/api/stacks/${id}/events?limit=5001`)
    expect([bad.status, bad.body.error.message]).toEqual([400, 'limit must be between 1 and 5000'])
  })

  test("another project's token: each of these reads answers like a missing stack", async () => {
    const row = (await c.rows(id))[0]!
    for (const path of [`/api/stacks/${id}/workers?ids=${c.workers[0]!.id}`, `/api/stacks/${id}/traversals/${first}`, `/api/stacks/${id}/traversals/current`, `/api/stacks/${id}/traversals/${first}/template`, `/api/stacks/${id}/resources/${row.id}`, `/api/stacks/${id}?outputs=0`]) {
      const r = await api.call('GET', path, { token: api.b.token })
      expect([path, r.status]).toEqual([path, 404])
    }
    const missing = await api.call('GET', `/api/stacks/${id}/traversals/00000000-0000-0000-0000-000000000000`)
    expect(missing.status).toBe(404)
  })
})
