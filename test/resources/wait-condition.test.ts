/**
 * OS::Heat::WaitCondition and its handle, with real workers over the real
 * API: the wait condition holds its stack IN_PROGRESS until enough SUCCESS
 * signals arrive (from a project token or the handle's own token), fails at
 * a FAILURE signal or at its timeout, and stops when the stack is deleted.
 * The handle's token can signal that handle and do nothing else.
 */
import { describe, expect, test } from 'vitest'
import { useKilnEnv } from '../helpers/stack-env'

const { cluster: c, api } = useKilnEnv({ cluster: { workers: 2 } })

const gated = (count: number, timeout = 600) => ({
  heat_template_version: '2018-08-31',
  resources: {
    handle: { type: 'OS::Heat::WaitConditionHandle' },
    gate: { type: 'OS::Heat::WaitCondition', properties: { handle: { get_resource: 'handle' }, count, timeout } },
    after: { type: 'OS::Heat::TestResource', properties: { value: { get_attr: ['gate', 'data'] } } },
  },
  outputs: { data: { value: { get_attr: ['gate', 'data'] } } },
})

async function create(name: string, template: unknown): Promise<string> {
  const r = await api.call('POST', '/api/stacks', { body: { name, template } })
  expect(r.status, r.text).toBe(201)
  return r.body.stack.id as string
}

/** The state of a stack's resource row, newest row of that name. */
async function row(stackId: string, name: string): Promise<{ action: string; status: string; reason: string; attributes: Record<string, unknown> | null }> {
  const { rows } = await c.db.pool.query(`SELECT action, status, status_reason AS reason, attributes FROM resource WHERE stack_id = $1 AND name = $2 ORDER BY id DESC LIMIT 1`, [stackId, name])
  return rows[0]
}

const waiting = (stackId: string) => c.waitFor(async () => {
  const r = await row(stackId, 'gate')
  return r?.action === 'CREATE' && r.status === 'IN_PROGRESS'
}, 30_000, 'the wait condition to start waiting')

const signal = (stackId: string, body: unknown, token?: string | null) => api.call('POST', `/api/stacks/${stackId}/resources/handle/signal`, { body, ...(token !== undefined ? { token } : {}) })

describe('OS::Heat::WaitCondition', () => {
  test('holds the stack until count SUCCESS signals arrived, from a project token and from the handle’s own token', async () => {
    const id = await create('gated', gated(2))
    await waiting(id)
    const first = await signal(id, { id: 'a', data: { x: 1 }, reason: 'first one' })
    expect(first.status, first.text).toBe(200)
    expect(first.body.signal).toEqual({ id: 'a', count: 1 })

    // One signal of two: the stack cannot complete. Its token, which the API never shows, is what
    // a script on a machine would be given (get_attr [handle, token] in its configuration).
    const token = (await row(id, 'handle')).attributes!.token as string
    expect(token).toMatch(/^kiln_sig_/)
    const shown = await api.call('GET', `/api/stacks/${id}/resources`)
    expect(JSON.stringify(shown.body)).not.toContain(token)
    expect((await c.stack(id)).status).toBe('IN_PROGRESS')

    const second = await signal(id, { data: 'two' }, token)
    expect(second.status, second.text).toBe(200)
    expect(second.body.signal).toEqual({ id: '2', count: 2 })
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    const out = await api.call('GET', `/api/stacks/${id}/outputs`)
    expect(JSON.parse(out.body.outputs.data.value)).toEqual({ a: { x: 1 }, 2: 'two' })
  })

  test('a FAILURE signal fails the wait condition with its reason; an unknown status or key is refused', async () => {
    const id = await create('failing', gated(1))
    await waiting(id)
    const bad = await signal(id, { status: 'MAYBE' })
    expect(bad.status).toBe(400)
    expect(bad.text).toMatch(/status/)
    expect((await signal(id, { stauts: 'SUCCESS' })).status).toBe(400)
    expect((await signal(id, { status: 'FAILURE', reason: 'the disk is full' })).status).toBe(200)
    expect(await c.settle(id)).toBe('CREATE_FAILED')
    expect((await row(id, 'gate')).reason).toMatch(/WaitConditionFailure: the disk is full/)
  })

  test('no signal within the timeout fails it', async () => {
    const id = await create('timing-out', gated(1, 1))
    expect(await c.settle(id)).toBe('CREATE_FAILED')
    expect((await row(id, 'gate')).reason).toMatch(/WaitConditionTimeout: 0 of 1 received within 1 s/)
  })

  test('deleting the stack stops the wait at once and removes the signals', async () => {
    const id = await create('deleted-while-waiting', gated(1))
    await waiting(id)
    expect((await api.call('DELETE', `/api/stacks/${id}`)).status).toBe(202)
    expect(await c.settle(id)).toBe('DELETE_COMPLETE')
    const { rows } = await c.db.pool.query(`SELECT count(*)::int AS n FROM resource_signal WHERE stack_id = $1`, [id])
    expect(rows[0].n).toBe(0)
    // The wait condition's create never finished, yet it is deleted before the handle it was made
    // from: the rows a create is made from are stored before it starts (as Heat does).
    const deleted = await c.db.pool.query(
      `SELECT resource_name FROM event WHERE stack_id = $1 AND action = 'DELETE' AND status = 'COMPLETE' AND resource_name IN ('gate', 'handle') ORDER BY seq`,
      [id],
    )
    expect(deleted.rows.map((r) => r.resource_name)).toEqual(['gate', 'handle'])
  })

  test('the handle’s token signals that handle only: no other route, no other handle, no other project', async () => {
    const one = await create('token-one', gated(1))
    const two = await create('token-two', gated(1))
    await waiting(one)
    await waiting(two)
    const token = (await row(one, 'handle')).attributes!.token as string
    expect((await api.call('GET', '/api/stacks', { token })).status).toBe(401)
    expect((await api.call('GET', `/api/stacks/${one}`, { token })).status).toBe(401)
    expect((await signal(two, {}, token)).status).toBe(404)
    // Forged: the same row, another secret.
    expect((await signal(one, {}, token.slice(0, -4) + 'AAAA')).status).toBe(401)
    // Another project's member cannot signal it either.
    expect((await signal(one, {}, api.b.token)).status).toBe(404)
    expect((await signal(one, {}, token)).status).toBe(200)
    expect(await c.settle(one)).toBe('CREATE_COMPLETE')
    expect((await signal(two, {})).status).toBe(200)
    expect(await c.settle(two)).toBe('CREATE_COMPLETE')
  })

  test('only a wait condition handle takes signals', async () => {
    const id = await create('not-a-handle', { heat_template_version: '2018-08-31', resources: { handle: { type: 'OS::Heat::Value', properties: { value: 1 } } } })
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    const r = await signal(id, {})
    expect(r.status).toBe(400)
    expect(r.text).toMatch(/does not take signals/)
  })

  test('an UpdateWaitConditionHandle is replaced at every update: its signals are gone and the wait condition waits for new ones', async () => {
    const rollout = (release: string) => ({
      heat_template_version: '2018-08-31',
      resources: {
        config: { type: 'OS::Heat::Value', properties: { value: release } },
        handle: { type: 'OS::Heat::UpdateWaitConditionHandle' },
        gate: { type: 'OS::Heat::WaitCondition', properties: { handle: { get_resource: 'handle' }, count: 1, timeout: 600 } },
      },
      outputs: { data: { value: { get_attr: ['gate', 'data'] } } },
    })
    const id = await create('rollout', rollout('v1'))
    await waiting(id)
    expect((await signal(id, { data: 'v1 rolled out' })).status).toBe(200)
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    const first = await row(id, 'handle')

    // The preview says so before the update does it.
    const preview = await api.call('POST', `/api/stacks/${id}/preview`, { body: { template: rollout('v2') } })
    expect(preview.status, preview.text).toBe(200)
    const item = (preview.body.items as { name: string; action: string }[]).find((x) => x.name === 'handle')
    expect(item?.action).toBe('replace')

    const u = await api.call('PUT', `/api/stacks/${id}`, { body: { template: rollout('v2') } })
    expect(u.status, u.text).toBe(202)
    // A new handle, with no signals: the wait condition waits again until the senders signal it.
    await c.waitFor(async () => {
      const h = await row(id, 'handle')
      return h.action === 'CREATE' && h.status === 'COMPLETE' && h.attributes?.token !== first.attributes?.token
    }, 30_000, 'the new handle')
    await c.waitFor(async () => (await row(id, 'gate')).status === 'IN_PROGRESS', 30_000, 'the wait condition to wait again')
    expect((await c.stack(id)).status).toBe('IN_PROGRESS')
    expect((await signal(id, { data: 'v2 rolled out' })).status).toBe(200)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect(JSON.parse((await api.call('GET', `/api/stacks/${id}/outputs`)).body.outputs.data.value)).toEqual({ 1: 'v2 rolled out' })
  })
})
