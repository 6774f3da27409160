/**
 * HTTP resource providers against a real test provider (test/helpers/test-provider.ts)
 * and real worker processes: registration, the types in templates (and only
 * in the registering project's), signed requests, in-place updates,
 * replacements, immutable properties, faults (5xx with retries, malformed
 * replies, a provider restarted mid-operation), long operations that park
 * and resume on a callback, drift, import, and a delete that cancels a long
 * operation. Nothing is created twice: the provider counts creates per
 * idempotency key. Gates, never sleeps: a long operation is held until the
 * test finishes it, a request until the test releases it.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { useKilnEnv } from '../helpers/stack-env'
import { PROVIDER_SECRET, startTestProvider, type TestProvider } from '../helpers/test-provider'

const { cluster: c, api } = useKilnEnv({ cluster: { workers: 2, leaseMs: 1500, env: { KILN_PROVIDER_TIMEOUT_MS: '1000' } } })

let p: TestProvider
beforeAll(async () => {
  p = await startTestProvider()
})
afterAll(async () => {
  await p?.stop()
})

const hot = (resources: Record<string, unknown>, outputs: Record<string, unknown> = {}) => JSON.stringify({ heat_template_version: '2018-08-31', resources, outputs })
const bucket = (props: Record<string, unknown>) => ({ type: 'Acme::Bucket', properties: props })

async function register(over: Record<string, unknown> = {}, token?: string) {
  return api.call('POST', '/api/providers', { body: { name: 'acme', url: p.url, prefix: 'Acme', secret: PROVIDER_SECRET, ...over }, ...(token ? { token } : {}) })
}

async function submit(name: string, template: string): Promise<string> {
  const r = await api.call('POST', '/api/stacks', { body: { name, template } })
  expect(r.status, r.text).toBe(201)
  return r.body.stack.id as string
}

async function update(id: string, template: string) {
  const r = await api.call('PUT', `/api/stacks/${id}`, { body: { template } })
  expect(r.status, r.text).toBe(202)
}

const rows = async (id: string) => (await api.call('GET', `/api/stacks/${id}/resources`)).body.resources as { name: string; action: string; status: string; status_reason?: string; statusReason?: string; physicalId?: string; physical_id?: string }[]
const reasonOf = (r: Record<string, unknown>) => String(r.statusReason ?? r.status_reason ?? '')
const outputs = async (id: string) => Object.fromEntries(Object.entries((await api.call('GET', `/api/stacks/${id}/outputs`)).body.outputs as Record<string, { value: unknown }>).map(([k, o]) => [k, o.value]))

describe('registering a provider', () => {
  test('its types are read, checked and offered to the registering project only', async () => {
    const r = await register()
    expect(r.status, r.text).toBe(201)
    expect(r.body.provider).toMatchObject({ name: 'acme', prefix: 'Acme', url: p.url })
    expect(r.body.provider.types.map((t: { name: string }) => t.name)).toEqual(['Bucket', 'Slow'])
    expect(r.body.secret, 'a given secret is not answered back').toBeUndefined()
    expect(JSON.stringify((await api.call('GET', '/api/providers')).body)).not.toContain(PROVIDER_SECRET)

    const types = (await api.call('GET', '/api/resource-types')).body.resourceTypes.map((t: { name: string }) => t.name)
    expect(types).toEqual(expect.arrayContaining(['Acme::Bucket', 'Acme::Slow']))
    const schema = (await api.call('GET', '/api/resource-types/Acme::Bucket')).body
    expect(schema.properties.size).toMatchObject({ type: 'integer', update_allowed: true })

    // Another project neither sees nor uses them.
    const b = api.b.token
    expect((await api.call('GET', '/api/resource-types', { token: b })).body.resourceTypes.map((t: { name: string }) => t.name)).not.toContain('Acme::Bucket')
    expect((await api.call('GET', '/api/resource-types/Acme::Bucket', { token: b })).status).toBe(404)
    const refused = await api.call('POST', '/api/stacks', { token: b, body: { name: 'theirs', template: hot({ x: bucket({ name: 'x' }) }) } })
    expect(refused.status).toBe(400)
    expect(refused.text).toContain('Acme::Bucket')
    // Nor can it take the prefix.
    expect((await register({ name: 'other' }, b)).status).toBe(409)
  })

  test('bad registrations are 400s naming the place, and nothing is stored', async () => {
    const unreachable = await register({ name: 'gone', prefix: 'Gone', url: 'http://127.0.0.1:9' })
    expect(unreachable.status).toBe(400)
    expect(unreachable.text).toMatch(/url: could not read the provider's types/)
    expect((await register({ name: 'os', prefix: 'OS' })).text).toMatch(/prefix: OS:: is reserved/)
    expect((await register({ name: 'bad url', prefix: 'Bad' })).status).toBe(400)
    const wrongSecret = await register({ name: 'wrong', prefix: 'Wrong', secret: 'not-the-providers-secret' })
    expect(wrongSecret.status).toBe(400)
    expect(wrongSecret.text).toContain('HTTP 401')
    const names = (await api.call('GET', '/api/providers')).body.providers.map((x: { name: string }) => x.name)
    expect(names).toEqual(['acme'])
  })
})

describe('resources of a provider', () => {
  test('create, data flowing on, update in place, a refused immutable change, a replacement and delete; every request signed', async () => {
    const unsignedBefore = p.unsigned // the registration with a wrong secret, above
    const t = (props: Record<string, unknown>) => hot({ b: bucket(props), v: { type: 'OS::Heat::Value', properties: { value: { get_attr: ['b', 'url'] } } } }, { url: { value: { get_attr: ['v', 'value'] } } })
    const id = await submit('buckets', t({ name: 'logs', size: 1 }))
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    expect(await outputs(id)).toEqual({ url: 'mem://logs' })
    const [made] = [...p.objects.values()].filter((o) => o.properties.name === 'logs')
    expect(made!.properties).toMatchObject({ name: 'logs', size: 1, region: 'here' })

    await update(id, t({ name: 'logs', size: 5 }))
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect(p.objects.get(made!.id)!.properties.size, 'updated in place').toBe(5)

    await update(id, t({ name: 'logs', size: 5, region: 'there' }))
    expect(await c.settle(id)).toBe('UPDATE_FAILED')
    expect(reasonOf((await rows(id)).find((r) => r.name === 'b')!)).toMatch(/region: immutable/)

    // The provider answers 409 replace: true to a new name: a new bucket, then the old one deleted.
    await update(id, t({ name: 'audit', size: 5 }))
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect([...p.objects.values()].map((o) => o.properties.name)).toEqual(['audit'])
    expect(await outputs(id)).toEqual({ url: 'mem://audit' })

    expect((await api.call('DELETE', `/api/stacks/${id}`)).status).toBeLessThan(300)
    expect(await c.settle(id)).toBe('DELETE_COMPLETE')
    expect(p.objects.size).toBe(0)
    expect(p.unsigned, 'every request Kiln sent was signed with the secret').toBe(unsignedBefore)
    expect([...p.createsByKey.values()].every((n) => n === 1), 'nothing created twice under one key').toBe(true)
  })

  test('5xx is retried with the same key; a malformed reply fails the resource with a reason', async () => {
    p.fail('create', { status: 503, times: 2 })
    const id = await submit('retried', hot({ b: bucket({ name: 'retried' }) }))
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    const keys = p.requests.filter((r) => r.op === 'create' && (r.body.properties as { name?: string }).name === 'retried').map((r) => r.key)
    expect(keys).toHaveLength(3)
    expect(new Set(keys).size, 'one idempotency key for every attempt').toBe(1)
    expect([...p.objects.values()].filter((o) => o.properties.name === 'retried')).toHaveLength(1)

    p.fail('create', { malformed: true })
    const bad = await submit('malformed', hot({ b: bucket({ name: 'malformed' }) }))
    expect(await c.settle(bad)).toBe('CREATE_FAILED')
    expect(reasonOf((await rows(bad))[0]!)).toMatch(/provider acme: POST \/create answered HTTP 200 with a body that is not JSON/)
  })

  test('a long operation parks the node and resumes on the callback; duplicate and forged callbacks do no harm', async () => {
    const id = await submit('slow', hot({ s: { type: 'Acme::Slow', properties: { label: 'big' } } }, { label: { value: { get_attr: ['s', 'label'] } } }))
    await c.waitFor(async () => p.pending().length === 1, 30_000, 'the long operation to start')
    const [key] = p.pending()
    // Parked: the event says so, and the node holds no worker slot.
    await c.waitFor(async () => (await api.call('GET', `/api/stacks/${id}/events?limit=100`)).body.events.some((e: { reason: string }) => /^parked: waiting for provider acme to finish create \(operation op-/.test(e.reason)), 30_000, 'the park')
    const forged = await fetch(`${api.url}/api/provider-callbacks/${id}/00000000-0000-4000-8000-000000000000?sig=nope`, { method: 'POST' })
    expect(forged.status).toBe(404)
    const statuses = await p.finish(key!, api.url, { callbacks: 2 })
    expect(statuses).toEqual([202, 202])
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    expect(await outputs(id)).toEqual({ label: 'big' })
    expect(p.createsByKey.get(key!)).toBe(1)
  })

  test('a delete while the provider works on a long operation cancels it there', async () => {
    const id = await submit('cancelled', hot({ s: { type: 'Acme::Slow', properties: { label: 'never' } } }))
    await c.waitFor(async () => p.pending().some((k) => p.requests.some((r) => r.key === k && (r.body.properties as { label?: string }).label === 'never')), 30_000, 'the long operation to start')
    expect((await api.call('DELETE', `/api/stacks/${id}`)).status).toBeLessThan(300)
    expect(await c.settle(id)).toBe('DELETE_COMPLETE')
    expect(p.requests.some((r) => r.op === 'cancel' && (r.body.properties as { label?: string }).label === 'never')).toBe(true)
  })

  test('a provider restarted mid-operation is asked again; the stack converges with one object', async () => {
    const held = p.hold('create')
    const id = await submit('restarted', hot({ b: bucket({ name: 'restarted' }) }))
    await held.reached
    await p.restart() // the held request's connection dies with the old server
    held.release()
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    expect([...p.objects.values()].filter((o) => o.properties.name === 'restarted')).toHaveLength(1)
  })

  test('drift is what observe answers; import adopts an object the provider has', async () => {
    const id = await submit('drifting', hot({ b: bucket({ name: 'drifting', size: 2 }) }))
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    const obj = [...p.objects.values()].find((o) => o.properties.name === 'drifting')!
    obj.properties.size = 9
    expect((await api.call('POST', `/api/stacks/${id}/drift`, { body: {} })).status).toBe(202)
    expect(await c.settle(id)).toBe('DRIFT_COMPLETE')
    const drift = (await api.call('GET', `/api/stacks/${id}/drift`)).body.drift
    expect(drift.resources[0]).toMatchObject({ name: 'b', state: 'MODIFIED', changes: [{ property: 'size', stored: 2, seen: 9 }] })

    p.objects.set('bkt-outside', { id: 'bkt-outside', type: 'Bucket', properties: { name: 'outside', size: 3, region: 'here' } })
    const imp = await api.call('POST', '/api/import', { body: { name: 'imported', template: hot({ o: { ...bucket({ name: 'outside', size: 3 }), external_id: 'bkt-outside' } }) } })
    expect(imp.status, imp.text).toBe(201)
    expect(await c.settle(imp.body.stack.id)).toBe('CREATE_COMPLETE')
    expect((await rows(imp.body.stack.id))[0]).toMatchObject({ name: 'o', status: 'COMPLETE' })
  })

  test('an answer that does not come in time is asked again with the same key: one object', async () => {
    const held = p.hold('create')
    const id = await submit('timed-out', hot({ b: bucket({ name: 'timed-out' }) }))
    await held.reached
    // Not released: Kiln's request times out (KILN_PROVIDER_TIMEOUT_MS) and is sent again.
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    held.release()
    const keys = p.requests.filter((r) => r.op === 'create' && (r.body.properties as { name?: string }).name === 'timed-out').map((r) => r.key)
    expect(keys.length).toBeGreaterThanOrEqual(2)
    expect(new Set(keys).size).toBe(1)
    await c.waitFor(async () => p.createsByKey.get(keys[0]!) !== undefined, 10_000, 'the held request to finish')
    expect([...p.objects.values()].filter((o) => o.properties.name === 'timed-out')).toHaveLength(1)
  })

  test('a worker killed while a provider request is in flight: the stack converges, no object is left twice', async () => {
    const held = p.hold('create')
    const id = await submit('killed', hot({ b: bucket({ name: 'killed' }) }))
    await held.reached
    const holder = (await c.rows(id)).find((r) => r.engine_id)?.engine_id
    const victim = c.workers.find((w) => w.id === holder)
    expect(victim, 'the lock holder is one of our workers').toBeDefined()
    victim!.proc.kill('SIGKILL')
    held.release() // the request the dead worker sent still makes its object
    c.spawnWorker()
    expect(await c.settle(id, 60_000)).toBe('CREATE_COMPLETE')
    const live = (await rows(id)).filter((r) => r.action !== 'DELETE')
    expect(live).toHaveLength(1)
    await c.waitFor(async () => [...p.objects.values()].filter((o) => o.properties.name === 'killed').length === 1, 30_000, 'one object named killed')
    expect((await api.call('DELETE', `/api/stacks/${id}`)).status).toBeLessThan(300)
    expect(await c.settle(id)).toBe('DELETE_COMPLETE')
    expect([...p.objects.values()].filter((o) => o.properties.name === 'killed')).toHaveLength(0)
  })

  test("a signal to a provider's resource is passed on to the provider, on both APIs; one it refuses is a 400 with its reason", async () => {
    const id = await submit('signalled', hot({ b: bucket({ name: 'signalled' }), s: { type: 'Acme::Slow', properties: { label: 'x' } } }))
    await c.waitFor(async () => p.pending().length > 0, 30_000, 'the slow create to start')
    const [key] = p.pending().filter((k) => p.requests.some((r) => r.key === k && (r.body.properties as { label?: string }).label === 'x'))
    await p.finish(key!, api.url)
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    const r = await api.call('POST', `/api/stacks/${id}/resources/b/signal`, { body: { status: 'SUCCESS', reason: 'deployed', data: { v: 1 } } })
    expect(r.status, r.text).toBe(200)
    const sent = p.requests.filter((x) => x.op === 'signal').at(-1)!
    expect(sent.body).toMatchObject({ operation: 'signal', type: 'Bucket', signal: { status: 'SUCCESS', reason: 'deployed', data: { v: 1 } }, previous: { properties: { name: 'signalled' } } })
    const heat = await api.call('POST', `/v1/${api.a.projectId}/stacks/signalled/${id}/resources/b/signal`, { body: { reason: 'from heat' } })
    expect(heat.status, heat.text).toBe(200)
    expect(p.requests.filter((x) => x.op === 'signal').at(-1)!.body.signal).toEqual({ reason: 'from heat' })
    const refused = await api.call('POST', `/api/stacks/${id}/resources/b/signal`, { body: { status: 'FAILURE', reason: 'broken' } })
    expect(refused.status).toBe(400)
    expect(refused.text).toContain('provider acme: the signal was refused: a failure signal: broken')
    // Slow does not declare signal.
    const none = await api.call('POST', `/api/stacks/${id}/resources/s/signal`, { body: {} })
    expect(none.status).toBe(400)
    expect(none.text).toContain('does not take signals')
  })

  test('an update that supersedes a traversal parked on a long operation takes the row over once it is done', async () => {
    const slow = (label: string) => hot({ s: { type: 'Acme::Slow', properties: { label } } }, { label: { value: { get_attr: ['s', 'label'] } } })
    const id = await submit('superseded', slow('first'))
    const started = (label: string) => p.pending().filter((k) => p.requests.some((r) => r.key === k && (r.body.properties as { label?: string }).label === label))
    await c.waitFor(async () => started('first').length === 1, 30_000, 'the first long operation')
    // A new label replaces the resource; the row is still held by the parked create.
    await update(id, slow('second'))
    await p.finish(started('first')[0]!, api.url)
    await c.waitFor(async () => started('second').length === 1, 30_000, 'the replacement to start its own long operation')
    await p.finish(started('second')[0]!, api.url)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect(await outputs(id)).toEqual({ label: 'second' })
    const slows = [...p.objects.values()].filter((o) => o.type === 'Slow' && ['first', 'second'].includes(String(o.properties.label)))
    expect(slows.map((o) => o.properties.label), 'the first is deleted once replaced').toEqual(['second'])
  })

  test('a preempting update stops a long operation: the provider is told to cancel, and the update converges', async () => {
    const slow = (label: string) => hot({ s: { type: 'Acme::Slow', properties: { label } } })
    const id = await submit('preempted', slow('stuck'))
    const started = (label: string) => p.pending().filter((k) => p.requests.some((r) => r.key === k && (r.body.properties as { label?: string }).label === label))
    await c.waitFor(async () => started('stuck').length === 1, 30_000, 'the long operation')
    const stuck = started('stuck')[0]!
    const r = await api.call('PUT', `/api/stacks/${id}`, { body: { template: slow('fresh'), preempt: true } })
    expect(r.status, r.text).toBe(202)
    await c.waitFor(async () => p.requests.some((x) => x.op === 'cancel' && x.key === stuck), 30_000, 'the cancel')
    await c.waitFor(async () => started('fresh').length === 1, 30_000, 'the new create')
    await p.finish(started('fresh')[0]!, api.url)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect(p.pending(), 'the preempted operation was cancelled at the provider').not.toContain(stuck)
  })
})
