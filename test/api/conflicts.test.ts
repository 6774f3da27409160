/**
 * No accidental overwrite, over the REST API with real workers: an update
 * names the version it was written against (`expect`, or If-Match with the
 * ETag GET returns); a stale one is refused with 409 and what changed
 * meanwhile (the operations since, a diff of templates and parameters), and
 * starts nothing; superseding a running update stays possible when the
 * client names the version it saw running; an unchanged submission answers
 * "no changes" unless forced. Heat's API keeps Heat's behaviour.
 */
import { describe, expect, test } from 'vitest'
import { useKilnEnv } from '../helpers/stack-env'

const { cluster: c, api } = useKilnEnv({ cluster: { workers: 2 } })

const template = (value: string, gated = false) => `heat_template_version: 2018-08-31
parameters:
  size:
    type: number
    default: 1
  pw:
    type: string
    hidden: true
    default: hidden-default-value
resources:
  a:
    type: OS::Heat::TestResource
    properties:
      value: ${value}
${gated ? `  handle:
    type: OS::Heat::WaitConditionHandle
  gate:
    type: OS::Heat::WaitCondition
    properties:
      handle: { get_resource: handle }
      timeout: 600
` : ''}`

async function create(name: string): Promise<string> {
  const r = await api.call('POST', '/api/stacks', { body: { name, template: template('one') } })
  expect(r.status, r.text).toBe(201)
  expect(await c.settle(r.body.stack.id)).toBe('CREATE_COMPLETE')
  return r.body.stack.id
}

const traversalCount = async (id: string) => (await c.db.pool.query('SELECT count(*)::int AS n FROM traversal WHERE stack_id = $1', [id])).rows[0].n as number

async function gateWaiting(id: string) {
  await c.waitFor(async () => {
    const { rows } = await c.db.pool.query(`SELECT status FROM resource WHERE stack_id = $1 AND name = 'gate' ORDER BY id DESC LIMIT 1`, [id])
    return rows[0]?.status === 'IN_PROGRESS'
  }, 30_000, 'the gate to wait')
}

/** The running update's wait condition holds its row until signalled (a supersede does not abort it). */
async function openGate(id: string) {
  expect((await api.call('POST', `/api/stacks/${id}/resources/handle/signal`, { body: {} })).status).toBe(200)
}

describe('no accidental overwrite', () => {
  test('GET returns the template version as ETag; a second editor with the same ETag gets 409 with what changed, and nothing starts', async () => {
    const id = await create('two-editors')
    const first = await api.call('GET', `/api/stacks/${id}`)
    const etag = first.headers.get('etag')!
    expect(etag).toBe(`"${first.body.stack.templateId}"`)
    const second = await api.call('GET', `/api/stacks/${id}`)
    expect(second.headers.get('etag')).toBe(etag)

    const a = await api.call('PUT', `/api/stacks/${id}`, { body: { template: template('from-alice'), parameters: { size: 2, pw: 'alice-hidden-value' } }, headers: { 'if-match': etag } })
    expect(a.status, a.text).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    // The update names its new version: what GET's ETag says from now on.
    expect((await api.call('GET', `/api/stacks/${id}`)).headers.get('etag')).toBe(`"${a.body.templateId}"`)
    const n = await traversalCount(id)

    const b = await api.call('PUT', `/api/stacks/${id}`, { body: { template: template('from-bob') }, headers: { 'if-match': etag } })
    expect(b.status).toBe(409)
    expect(await traversalCount(id)).toBe(n)
    const e = b.body.error
    expect(e.code).toBe('conflict')
    expect(e.message).toMatch(/changed since the version this edit was written against/)
    expect(e.message).toContain('an update by')
    expect(e.expected).toEqual({ templateId: first.body.stack.templateId, traversalId: first.body.stack.currentTraversalId })
    expect(e.current).toMatchObject({ traversalId: a.body.traversalId, action: 'UPDATE', status: 'COMPLETE' })
    expect(e.since).toEqual([expect.objectContaining({ id: a.body.traversalId, action: 'UPDATE', outcome: 'COMPLETE' })])
    expect(e.diff.template).toContain('-      value: one')
    expect(e.diff.template).toContain('+      value: from-alice')
    expect(e.diff.parameters).toEqual([
      { name: 'pw', before: '******', after: '******', hidden: true },
      { name: 'size', before: 1, after: 2 },
    ])
    expect(JSON.stringify(b.body)).not.toContain('alice-hidden-value')

    // The same with `expect` in the body (a traversal id), and with the current version: accepted.
    expect((await api.call('PUT', `/api/stacks/${id}`, { body: { template: template('from-bob'), expect: first.body.stack.currentTraversalId } })).status).toBe(409)
    const rebased = await api.call('PUT', `/api/stacks/${id}`, { body: { template: template('from-bob'), expect: e.current.templateId } })
    expect(rebased.status, rebased.text).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
  })

  test('superseding a running update: deliberate when the client names the running version, refused when it names an older one', async () => {
    const id = await create('supersede')
    const before = (await api.call('GET', `/api/stacks/${id}`)).body.stack
    const running = await api.call('PATCH', `/api/stacks/${id}`, { body: { template: template('two', true), expect: before.templateId } })
    expect(running.status, running.text).toBe(202)
    await gateWaiting(id)
    const seen = await api.call('GET', `/api/stacks/${id}`)
    expect(seen.body.stack.currentTraversalId).toBe(running.body.traversalId)

    const stale = await api.call('PUT', `/api/stacks/${id}`, { body: { template: template('three'), expect: before.currentTraversalId } })
    expect(stale.status).toBe(409)
    expect(stale.body.error.since).toEqual([expect.objectContaining({ id: running.body.traversalId, outcome: null })])
    expect(stale.body.error.message).toContain('(running, traversal')

    const knowingly = await api.call('PUT', `/api/stacks/${id}`, { body: { template: template('three') }, headers: { 'if-match': seen.headers.get('etag')! } })
    expect(knowingly.status, knowingly.text).toBe(202)
    expect(knowingly.body.superseded).toBe(running.body.traversalId)
    await openGate(id)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
  })

  test('an edit written before a rollback is refused, naming the rollback', async () => {
    const id = await create('rolled-back')
    const up = await api.call('PUT', `/api/stacks/${id}`, { body: { template: template('two', true) } })
    expect(up.status).toBe(202)
    await gateWaiting(id)
    const seen = await api.call('GET', `/api/stacks/${id}`)
    const rollback = await api.call('POST', `/api/stacks/${id}/cancel`, { body: { rollback: true } })
    expect(rollback.status).toBe(202)
    await openGate(id)
    expect(await c.settle(id)).toBe('ROLLBACK_COMPLETE')
    const r = await api.call('PUT', `/api/stacks/${id}`, { body: { template: template('three') }, headers: { 'if-match': seen.headers.get('etag')! } })
    expect(r.status).toBe(409)
    expect(r.body.error.message).toContain('a rollback by')
    expect(r.body.error.diff.template).toContain('-  handle:')
  })

  test('an unchanged submission says "no changes" and starts nothing, unless forced; a failed stack retries', async () => {
    const id = await create('unchanged')
    const n = await traversalCount(id)
    const same = await api.call('PUT', `/api/stacks/${id}`, { body: { template: template('one') } })
    expect(same.status).toBe(200)
    expect(same.body).toMatchObject({ noChanges: true, traversalId: null })
    expect(same.body.message).toMatch(/^no changes/)
    const patched = await api.call('PATCH', `/api/stacks/${id}`, { body: {} })
    expect(patched.body.noChanges).toBe(true)
    expect(await traversalCount(id)).toBe(n)
    // A setting is a change; so is force.
    expect((await api.call('PATCH', `/api/stacks/${id}`, { body: { timeoutMins: 7 } })).status).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    const forced = await api.call('PUT', `/api/stacks/${id}`, { body: { template: template('one'), force: true } })
    expect(forced.status).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect(await traversalCount(id)).toBe(n + 2)

    // Heat's API has no "no changes": it starts the update, as Heat does.
    const s = (await api.call('GET', `/api/stacks/${id}`)).body.stack
    const heat = await api.call('PUT', `/v1/${api.a.projectId}/stacks/unchanged/${id}`, { body: { template: template('one'), timeout_mins: 7 } })
    expect(heat.status, heat.text).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect(await traversalCount(id)).toBe(n + 3)
    expect((await api.call('GET', `/api/stacks/${id}`)).body.stack.templateId).not.toBe(s.templateId)

    // A failed stack's resubmission is a retry, not "no changes".
    const broken = template('one').replace('value: one', 'value: one\n      fail: true')
    expect((await api.call('PUT', `/api/stacks/${id}`, { body: { template: broken } })).status).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_FAILED')
    const retry = await api.call('PUT', `/api/stacks/${id}`, { body: { template: broken } })
    expect(retry.status).toBe(202)
    expect(retry.body.traversalId).toEqual(expect.any(String))
    expect(await c.settle(id)).toBe('UPDATE_FAILED')
  })

  test('expect and If-Match are checked at the boundary', async () => {
    const id = await create('bad-expect')
    const etag = (await api.call('GET', `/api/stacks/${id}`)).headers.get('etag')!
    const garbage = await api.call('PUT', `/api/stacks/${id}`, { body: { template: template('x'), expect: 'not-a-version' } })
    expect(garbage.status).toBe(400)
    expect(garbage.body.error.issues[0].path).toBe('body.expect')
    const other = await api.call('PUT', `/api/stacks/${id}`, { body: { template: template('x') }, headers: { 'if-match': '"00000000-0000-4000-8000-000000000000"' } })
    expect(other.status).toBe(400)
    expect(other.body.error.message).toContain('If-Match')
    const both = await api.call('PUT', `/api/stacks/${id}`, { body: { template: template('x'), expect: '00000000-0000-4000-8000-000000000000' }, headers: { 'if-match': etag } })
    expect(both.status).toBe(400)
    expect(both.body.error.message).toMatch(/If-Match .* and body.expect .* name different versions/)
    expect((await api.call('PUT', `/api/stacks/${id}`, { body: { template: template('x') }, headers: { 'if-match': 'no-quotes' } })).status).toBe(400)
    // If-Match: * is any version.
    expect((await api.call('PUT', `/api/stacks/${id}`, { body: { template: template('x') }, headers: { 'if-match': '*' } })).status).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
  })

  test("a traversal's template and parameters, and the diff between two traversals", async () => {
    const id = await create('history')
    const t1 = (await api.call('GET', `/api/stacks/${id}`)).body.stack.currentTraversalId
    const up = await api.call('PUT', `/api/stacks/${id}`, { body: { template: template('two'), parameters: { size: 3, pw: 'new-hidden-value' } } })
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    const v1 = await api.call('GET', `/api/stacks/${id}/traversals/${t1}/template`)
    expect(v1.status).toBe(200)
    expect(v1.body).toMatchObject({ traversalId: t1, parameters: { size: 1, pw: '******' } })
    expect(v1.body.source).toContain('value: one')
    const cur = await api.call('GET', `/api/stacks/${id}/traversals/current/template`)
    expect(cur.body).toMatchObject({ traversalId: up.body.traversalId, parameters: { size: 3, pw: '******' } })
    const d = await api.call('GET', `/api/stacks/${id}/diff?from=${t1}&to=${up.body.traversalId}`)
    expect(d.status).toBe(200)
    expect(d.body.template).toContain('+      value: two')
    expect(d.body.parameters).toEqual([{ name: 'pw', before: '******', after: '******', hidden: true }, { name: 'size', before: 1, after: 3 }])
    expect(JSON.stringify([v1.body, cur.body, d.body])).not.toContain('new-hidden-value')
    expect((await api.call('GET', `/api/stacks/${id}/diff?from=nope`)).status).toBe(400)
    expect((await api.call('GET', `/api/stacks/${id}/traversals/00000000-0000-4000-8000-000000000000/template`)).status).toBe(404)
    // Another project sees none of it.
    expect((await api.call('GET', `/api/stacks/${id}/traversals/${t1}/template`, { token: api.b.token })).status).toBe(404)
  })
})
