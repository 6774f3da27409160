/**
 * Saved plans over the REST API with real workers: a plan stores the preview
 * and the submission; applying it runs exactly that submission when nothing
 * moved, and is refused with 409 naming what changed after another update,
 * after a rollback, and after a row changed (the running update it was
 * computed during moved on); an expired plan is refused; a plan applies once;
 * list, show and discard.
 */
import { describe, expect, test } from 'vitest'
import { useKilnEnv } from '../helpers/stack-env'

const { cluster: c, api } = useKilnEnv({ cluster: { workers: 2 } })

const hot = (value: string, extra: Record<string, unknown> = {}) => ({
  heat_template_version: '2018-08-31',
  parameters: { p: { type: 'string', default: 'd' } },
  resources: { a: { type: 'OS::Heat::TestResource', properties: { value } }, b: { type: 'OS::Heat::TestResource', properties: { value: { get_attr: ['a', 'output'] } } }, ...extra },
  outputs: { out: { value: { get_attr: ['b', 'output'] } } },
})
const gate = {
  handle: { type: 'OS::Heat::WaitConditionHandle' },
  gate: { type: 'OS::Heat::WaitCondition', properties: { handle: { get_resource: 'handle' }, timeout: 600 } },
}

async function create(name: string): Promise<string> {
  const r = await api.call('POST', '/api/stacks', { body: { name, template: hot('one') } })
  expect(r.status, r.text).toBe(201)
  expect(await c.settle(r.body.stack.id)).toBe('CREATE_COMPLETE')
  return r.body.stack.id
}

async function plan(id: string, body: Record<string, unknown>) {
  const r = await api.call('POST', `/api/stacks/${id}/plans`, { body })
  expect(r.status, r.text).toBe(201)
  return r.body.plan
}

const apply = (id: string, planId: string) => api.call('POST', `/api/stacks/${id}/plans/${planId}/apply`, { body: {} })
const traversalCount = async (id: string) => (await c.db.pool.query('SELECT count(*)::int AS n FROM traversal WHERE stack_id = $1', [id])).rows[0].n as number

describe('saved plans', () => {
  test('a plan shows the preview and applies exactly its submission when nothing moved; once', async () => {
    const id = await create('plan-apply')
    const shown = (await api.call('GET', `/api/stacks/${id}`)).body.stack
    const p = await plan(id, { template: hot('two'), parameters: { p: 'given' } })
    expect(p).toMatchObject({ stack: { id, name: 'plan-apply' }, expired: false, appliedAt: null, against: { traversalId: shown.currentTraversalId, templateId: shown.templateId } })
    expect(p.preview.items.map((i: { name: string; action: string; certain: boolean }) => `${i.name}:${i.action}:${i.certain}`)).toEqual(['a:update:true', 'b:update:false'])
    expect(Date.parse(p.expiresAt) - Date.parse(p.createdAt)).toBe(86_400_000)

    expect((await api.call('GET', `/api/stacks/${id}/plans`)).body.plans.map((x: { id: string }) => x.id)).toEqual([p.id])
    expect((await api.call('GET', `/api/stacks/${id}/plans/${p.id}`)).body.plan.preview).toEqual(p.preview)
    expect((await api.call('GET', `/api/plans/${p.id}`)).body.plan.stack).toEqual({ id, name: 'plan-apply' })
    // Computing a plan starts nothing.
    expect(await traversalCount(id)).toBe(1)

    const r = await apply(id, p.id)
    expect(r.status, r.text).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    const after = (await api.call('GET', `/api/stacks/${id}`)).body.stack
    expect(after.outputs.out.value).toBe('two')
    expect(after.parameters.p).toBe('given')
    expect((await api.call('GET', `/api/stacks/${id}/plans/${p.id}`)).body.plan).toMatchObject({ appliedTraversalId: r.body.traversalId, appliedAt: expect.any(String) })

    const again = await apply(id, p.id)
    expect(again.status).toBe(409)
    expect(again.body.error.message).toContain('already applied')
  })

  test('409 after another update, naming it and what it changed', async () => {
    const id = await create('plan-other-update')
    const p = await plan(id, { template: hot('two') })
    const other = await api.call('PUT', `/api/stacks/${id}`, { body: { template: hot('three') } })
    expect(other.status).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    const n = await traversalCount(id)
    const r = await apply(id, p.id)
    expect(r.status).toBe(409)
    expect(r.body.error.message).toMatch(/^plan .* is stale: .*an update by/)
    expect(r.body.error.since).toEqual([expect.objectContaining({ id: other.body.traversalId, action: 'UPDATE' })])
    expect(r.body.error.diff.template).toContain('+')
    expect(await traversalCount(id)).toBe(n)
    expect((await api.call('GET', `/api/stacks/${id}`)).body.stack.outputs.out.value).toBe('three')
  })

  test('409 after a rollback', async () => {
    const id = await create('plan-rollback')
    const up = await api.call('PUT', `/api/stacks/${id}`, { body: { template: hot('two', gate) } })
    expect(up.status).toBe(202)
    await c.waitFor(async () => (await c.db.pool.query(`SELECT status FROM resource WHERE stack_id = $1 AND name = 'gate'`, [id])).rows[0]?.status === 'IN_PROGRESS', 30_000, 'the gate to wait')
    const p = await plan(id, { template: hot('three', gate) })
    expect((await api.call('POST', `/api/stacks/${id}/cancel`, { body: { rollback: true } })).status).toBe(202)
    expect((await api.call('POST', `/api/stacks/${id}/resources/handle/signal`, { body: {} })).status).toBe(200)
    expect(await c.settle(id)).toBe('ROLLBACK_COMPLETE')
    const r = await apply(id, p.id)
    expect(r.status).toBe(409)
    expect(r.body.error.message).toContain('a rollback by')
  })

  test('409 after a row changed: a plan computed while an update runs is stale once that update moves on', async () => {
    const id = await create('plan-row')
    const up = await api.call('PUT', `/api/stacks/${id}`, { body: { template: hot('two', gate) } })
    expect(up.status).toBe(202)
    await c.waitFor(async () => (await c.db.pool.query(`SELECT status FROM resource WHERE stack_id = $1 AND name = 'gate'`, [id])).rows[0]?.status === 'IN_PROGRESS', 30_000, 'the gate to wait')
    const p = await plan(id, { template: hot('three', gate) })
    expect(p.against.traversalId).toBe(up.body.traversalId)
    expect(p.preview.against.inFlight).toBe(true)
    // The running update goes on: the gate completes. Its traversal is still the stack's current one.
    expect((await api.call('POST', `/api/stacks/${id}/resources/handle/signal`, { body: {} })).status).toBe(200)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect((await api.call('GET', `/api/stacks/${id}`)).body.stack.currentTraversalId).toBe(up.body.traversalId)
    const n = await traversalCount(id)
    const r = await apply(id, p.id)
    expect(r.status).toBe(409)
    expect(r.body.error.message).toMatch(/resources changed since it was computed: .*gate #\d+ changed \(now CREATE_COMPLETE\)/)
    expect(r.body.error.rows).toContainEqual(expect.objectContaining({ name: 'gate', change: 'changed', now: 'CREATE_COMPLETE' }))
    expect(await traversalCount(id)).toBe(n)
    // Nothing was written: the plan can still be discarded, not applied.
    expect((await api.call('GET', `/api/stacks/${id}/plans/${p.id}`)).body.plan.appliedAt).toBeNull()
  })

  test('an expired plan is refused (410) and starts nothing', async () => {
    const id = await create('plan-expired')
    const p = await plan(id, { template: hot('two') })
    // Expiry is the database's clock passing expires_at: moved there rather than waited for.
    await c.db.pool.query(`UPDATE plan SET expires_at = now() - interval '1 second' WHERE id = $1`, [p.id])
    const r = await apply(id, p.id)
    expect(r.status).toBe(410)
    expect(r.body.error).toMatchObject({ code: 'plan_expired' })
    expect(r.body.error.message).toContain('expired')
    expect((await api.call('GET', `/api/stacks/${id}/plans/${p.id}`)).body.plan.expired).toBe(true)
    expect(await traversalCount(id)).toBe(1)
    // The next plan computed for the stack clears expired ones away.
    await plan(id, { template: hot('two') })
    expect((await api.call('GET', `/api/stacks/${id}/plans/${p.id}`)).status).toBe(404)
  })

  test('discard; another project sees none of it; bad input is a 4xx', async () => {
    const id = await create('plan-discard')
    const p = await plan(id, { template: hot('two') })
    for (const [m, path] of [['GET', `/api/stacks/${id}/plans/${p.id}`], ['POST', `/api/stacks/${id}/plans/${p.id}/apply`], ['DELETE', `/api/stacks/${id}/plans/${p.id}`], ['GET', `/api/plans/${p.id}`]] as const) {
      expect((await api.call(m, path, { token: api.b.token, ...(m === 'POST' ? { body: {} } : {}) })).status, `${m} ${path}`).toBe(404)
    }
    expect((await api.call('DELETE', `/api/stacks/${id}/plans/${p.id}`)).status).toBe(204)
    expect((await api.call('GET', `/api/stacks/${id}/plans/${p.id}`)).status).toBe(404)
    expect((await api.call('GET', `/api/stacks/${id}/plans/not-a-plan`)).status).toBe(404)
    const bad = await api.call('POST', `/api/stacks/${id}/plans`, { body: { template: hot('two'), expect: 'x' } })
    expect(bad.status).toBe(400)
    expect(bad.body.error.message).toContain('expect')
    const invalid = await api.call('POST', `/api/stacks/${id}/plans`, { body: { template: { heat_template_version: '2018-08-31', resources: { a: { type: 'Nope' } } } } })
    expect(invalid.status).toBe(400)
    expect(invalid.body.error.issues[0].path).toBe('resources.a.type')
  })
})
