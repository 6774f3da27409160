/**
 * Golden previews, each then checked against what the update really did
 * (real workers, the REST API): a cascade through get_attr two levels deep;
 * replacement by update_replace, by a property the type cannot update and by
 * a type change; a failed row; a deletion; a condition that turns a resource
 * off; a parameter that reaches only some resources; a preview taken while
 * an update runs (held at a wait condition); and the 49-resource stack whose
 * preview once said "6 updated in place · 0 replaced · 43 unchanged".
 */
import { describe, expect, test } from 'vitest'
import { actions, disagreements, liveNames, whatItDid } from '../helpers/preview-check'
import { useKilnEnv } from '../helpers/stack-env'
import { PreviewResultSchema, type PreviewResult } from '../../lib/plan/preview-types'

const { cluster: c, api } = useKilnEnv({ cluster: { workers: 2 } })

type Template = Record<string, unknown>
const hot = (resources: Record<string, unknown>, extra: Template = {}): Template => ({ heat_template_version: '2018-08-31', ...extra, resources })
const test_ = (properties: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) => ({ type: 'OS::Heat::TestResource', properties, ...extra })
const attr = (name: string) => ({ get_attr: [name, 'output'] })

async function create(name: string, template: Template, parameters?: Record<string, unknown>): Promise<string> {
  const r = await api.call('POST', '/api/stacks', { body: { name, template, ...(parameters ? { parameters } : {}) } })
  expect(r.status, r.text).toBe(201)
  const id = r.body.stack.id as string
  expect(await c.settle(id)).toBe('CREATE_COMPLETE')
  return id
}

async function preview(id: string, template: Template, parameters?: Record<string, unknown>): Promise<PreviewResult> {
  const r = await api.call('POST', `/api/stacks/${id}/preview`, { body: { template, ...(parameters ? { parameters } : {}) } })
  expect(r.status, r.text).toBe(200)
  // The answer is exactly the documented format (parsing drops any field the schema does not name).
  expect(PreviewResultSchema.parse(r.body)).toEqual(r.body)
  return r.body as PreviewResult
}

/** Run the update the preview was taken for; the preview must agree with what it did. */
async function applyAndCompare(id: string, p: PreviewResult, template: Template, parameters?: Record<string, unknown>, ends = 'UPDATE_COMPLETE') {
  const before = await liveNames(c.db.pool, id)
  const r = await api.call('PUT', `/api/stacks/${id}`, { body: { template, ...(parameters ? { parameters } : {}) } })
  expect(r.status, r.text).toBe(202)
  expect(await c.settle(id)).toBe(ends)
  const did = await whatItDid(c.db.pool, r.body.traversalId, before)
  expect(disagreements(p, did)).toEqual([])
  return did
}

describe('preview', () => {
  test('a cascade through get_attr two levels deep: what depends on an updated resource may update, never unchanged', async () => {
    const v1 = hot({ a: test_({ value: 'one' }), b: test_({ value: attr('a') }), c: test_({ value: attr('b') }), d: test_({ value: 'alone' }) })
    const id = await create('cascade', v1)
    const v2 = hot({ a: test_({ value: 'two' }), b: test_({ value: attr('a') }), c: test_({ value: attr('b') }), d: test_({ value: 'alone' }) })
    const p = await preview(id, v2)
    expect(actions(p)).toEqual({ a: 'update', b: 'may update', c: 'may update', d: 'unchanged' })
    expect(p.items.find((i) => i.name === 'a')!.changes).toEqual([{ path: 'value', before: 'one', after: 'two' }])
    expect(p.items.find((i) => i.name === 'b')).toMatchObject({ changed: ['value'], changes: [{ path: 'value', before: 'one', afterUnknown: true }], reason: 'depends on values known after apply: value' })
    expect(p.summary).toEqual({ create: 0, update: 3, replace: 0, delete: 0, unchanged: 1, uncertain: 2 })
    const did = await applyAndCompare(id, p, v2)
    expect(Object.fromEntries(did)).toEqual({ a: 'update', b: 'update', c: 'update' })
  })

  test('replacement by update_replace, by a property the type cannot update, and by a type change', async () => {
    const v1 = hot({ r1: test_({ value: 'x' }), r2: test_({ update_replace_value: 'p' }), r3: test_({ value: 'k' }), r4: test_({ value: { get_resource: 'r1' } }) })
    const id = await create('replacements', v1)
    const v2 = hot({
      r1: test_({ value: 'x', update_replace: true }),
      r2: test_({ update_replace_value: 'q' }),
      r3: { type: 'OS::Heat::None', properties: { value: 'k' } },
      r4: test_({ value: { get_resource: 'r1' } }),
    })
    const p = await preview(id, v2)
    expect(actions(p)).toEqual({ r1: 'replace', r2: 'replace', r3: 'replace', r4: 'may update' })
    const item = (n: string) => p.items.find((i) => i.name === n)!
    expect(item('r1')).toMatchObject({ reason: 'update_replace is set', changes: [{ path: 'update_replace', before: false, after: true }] })
    expect(item('r2')).toMatchObject({ reason: 'update of update_replace_value requires replacement', changes: [{ path: 'update_replace_value', before: 'p', after: 'q', forcesReplacement: true }] })
    expect(item('r3')).toMatchObject({ type: 'OS::Heat::None', fromType: 'OS::Heat::TestResource', reason: 'type changed from OS::Heat::TestResource to OS::Heat::None' })
    expect(item('r4').changes).toEqual([{ path: 'value', before: expect.stringMatching(/^replacements-r1-/), afterUnknown: true }])
    const did = await applyAndCompare(id, p, v2)
    expect(Object.fromEntries(did)).toEqual({ r1: 'replace', r2: 'replace', r3: 'replace', r4: 'update' })
  })

  test('a failed row is replaced, and what reads it may update', async () => {
    const v1 = hot({ f: test_({ value: 'ok' }), g: test_({ value: attr('f') }) })
    const id = await create('failed-row', v1)
    const broken = hot({ f: test_({ value: 'ok', fail: true }), g: test_({ value: attr('f') }) })
    expect((await api.call('PUT', `/api/stacks/${id}`, { body: { template: broken } })).status).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_FAILED')
    const p = await preview(id, v1)
    expect(actions(p)).toEqual({ f: 'replace', g: 'may update' })
    // The failed update stored nothing of its properties: the row is replaced for failing, not for a change.
    expect(p.items[0]).toEqual({ name: 'f', type: 'OS::Heat::TestResource', action: 'replace', certain: true, reason: 'UPDATE_FAILED resource is replaced' })
    await applyAndCompare(id, p, v1)
  })

  test('deletion, with deletion_policy Retain named', async () => {
    const v1 = hot({ a: test_({ value: 'a' }), b: test_({ value: attr('a') }), kept: test_({ value: 'k' }, { deletion_policy: 'Retain' }) })
    const id = await create('deletion', v1)
    const v2 = hot({ a: test_({ value: 'a' }) })
    const p = await preview(id, v2)
    expect(actions(p)).toEqual({ a: 'unchanged', b: 'delete', kept: 'delete' })
    expect(p.items.find((i) => i.name === 'kept')!.reason).toBe('deletion_policy Retain: the resource is kept outside the stack')
    expect(p.items.find((i) => i.name === 'b')!.changes).toContainEqual({ path: 'value', before: 'a' })
    await applyAndCompare(id, p, v2)
  })

  test('a condition that turns a resource off, and the outputs and conditions it changes', async () => {
    const t = hot(
      { x: test_({ value: 'x' }, { condition: 'on' }), y: test_({ value: 'y' }) },
      {
        parameters: { enable: { type: 'boolean', default: true } },
        conditions: { on: { equals: [{ get_param: 'enable' }, true] } },
        outputs: { xout: { value: attr('x'), condition: 'on' }, yout: { value: attr('y') } },
      },
    )
    const id = await create('conditions', t)
    const p = await preview(id, t, { enable: false })
    expect(actions(p)).toEqual({ y: 'unchanged', x: 'delete' })
    expect(p.items.find((i) => i.name === 'x')!.reason).toBe('condition on is false')
    expect(p.conditions).toEqual([{ name: 'on', before: true, after: false }])
    expect(p.outputs).toEqual([
      { name: 'xout', action: 'update', certain: true, changes: [{ path: '', before: 'x', after: null }] },
      { name: 'yout', action: 'unchanged', certain: true },
    ])
    await applyAndCompare(id, p, t, { enable: false })
    const back = await preview(id, t, { enable: true })
    expect(actions(back)).toEqual({ x: 'create', y: 'unchanged' })
    expect(back.items.find((i) => i.name === 'x')!.reason).toBe('condition on is now true')
  })

  test('a parameter change reaches only the resources that use it; what reads an unchanged resource stays unchanged', async () => {
    const t = hot(
      {
        a: test_({ value: { get_param: 'p' } }),
        b: test_({ value: { list_join: ['-', [{ get_param: 'p' }, attr('c')]] } }),
        c: test_({ value: 'z' }),
        d: test_({ value: attr('c') }),
      },
      { parameters: { p: { type: 'string', default: 'one' } } },
    )
    const id = await create('parameter', t)
    const p = await preview(id, t, { p: 'two' })
    expect(actions(p)).toEqual({ a: 'update', c: 'unchanged', b: 'update', d: 'unchanged' })
    expect(p.items.find((i) => i.name === 'b')!.changes).toEqual([{ path: 'value', before: 'one-z', after: 'two-z' }])
    await applyAndCompare(id, p, t, { p: 'two' })
  })

  test('hidden parameter values are masked in the property diff, before and after', async () => {
    const t = hot({ s: test_({ value: { get_param: 'pw' } }) }, { parameters: { pw: { type: 'string', hidden: true } } })
    const id = await create('masked', t, { pw: 'first-secret-value' })
    const p = await preview(id, t, { pw: 'second-secret-value' })
    expect(p.items[0]).toMatchObject({ name: 's', action: 'update', certain: true, changes: [{ path: 'value', before: '******', after: '******' }] })
    expect(JSON.stringify(p)).not.toMatch(/secret-value/)
  })

  test("a secret attribute's value that a property read is masked in the diff (a wait condition handle's token)", async () => {
    const v1 = hot({ handle: { type: 'OS::Heat::WaitConditionHandle' }, reader: test_({ value: { get_attr: ['handle', 'token'] } }) })
    const id = await create('secret-attribute', v1)
    const { rows } = await c.db.pool.query(`SELECT attributes->>'token' AS token FROM resource WHERE stack_id = $1 AND name = 'handle'`, [id])
    const token = String(rows[0].token)
    expect(token.length).toBeGreaterThan(20)
    const p = await preview(id, hot({ handle: { type: 'OS::Heat::WaitConditionHandle' } }))
    expect(p.items.find((i) => i.name === 'reader')).toMatchObject({ action: 'delete', changes: expect.arrayContaining([{ path: 'value', before: '******' }]) })
    expect(JSON.stringify(p)).not.toContain(token)
  })

  test('a preview taken while an update runs compares with where that update is heading', async () => {
    const v1 = hot({ a: test_({ value: 'one' }), b: test_({ value: attr('a') }) })
    const id = await create('in-flight', v1)
    const gate = { handle: { type: 'OS::Heat::WaitConditionHandle' }, gate: { type: 'OS::Heat::WaitCondition', properties: { handle: { get_resource: 'handle' }, timeout: 600 } } }
    const v2 = hot({ a: test_({ value: 'two' }), ...gate, b: test_({ value: attr('a') }, { depends_on: ['gate'] }) })
    const running = await api.call('PUT', `/api/stacks/${id}`, { body: { template: v2 } })
    expect(running.status).toBe(202)
    // Held at the gate: `a` is updated, `b` waits for the gate, which waits for a signal.
    await c.waitFor(async () => {
      const { rows } = await c.db.pool.query(`SELECT action, status FROM resource WHERE stack_id = $1 AND name = 'gate'`, [id])
      return rows[0]?.action === 'CREATE' && rows[0]?.status === 'IN_PROGRESS'
    }, 30_000, 'the gate to wait')
    const v3 = hot({ a: test_({ value: 'two' }), ...gate, b: test_({ value: { list_join: ['-', [attr('a'), 'x']] } }, { depends_on: ['gate'] }) })
    const p = await preview(id, v3)
    expect(p.against).toEqual({ templateId: expect.any(String), traversalId: running.body.traversalId, inFlight: true })
    expect(actions(p)).toEqual({ a: 'unchanged', handle: 'unchanged', gate: 'unchanged', b: 'update' })
    expect(p.items.find((i) => i.name === 'b')).toMatchObject({ pending: true, changes: [{ path: 'value', before: 'two', after: 'two-x' }] })
    expect(p.items.find((i) => i.name === 'gate')!.pending).toBe(true)
    expect(p.items.find((i) => i.name === 'a')!.pending).toBeUndefined()

    // Supersede knowingly, then open the gate: the new traversal does what the preview said.
    const before = await liveNames(c.db.pool, id)
    const next = await api.call('PUT', `/api/stacks/${id}`, { body: { template: v3, expect: running.body.traversalId } })
    expect(next.status, next.text).toBe(202)
    expect(next.body.superseded).toBe(running.body.traversalId)
    expect((await api.call('POST', `/api/stacks/${id}/resources/handle/signal`, { body: {} })).status).toBe(200)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    const did = await whatItDid(c.db.pool, next.body.traversalId, before)
    expect(disagreements(p, did)).toEqual([])
    expect(Object.fromEntries(did)).toEqual({ b: 'update' })
  })

  test('the 49-resource stack: the preview says what the update then does (about 30 in place, 3 replaced)', async () => {
    const t = (v: { net: string; sg1: string; vol2: string; replace: boolean }) => {
      const r: Record<string, unknown> = { network: test_({ value: v.net }) }
      for (let i = 0; i < 4; i++) r[`subnet${i}`] = test_({ value: { list_join: ['/', [attr('network'), `s${i}`]] } })
      for (let i = 0; i < 4; i++) r[`sg${i}`] = test_({ value: i === 1 ? v.sg1 : `sg${i}` })
      for (let i = 0; i < 8; i++) r[`volume${i}`] = test_({ value: i === 2 ? v.vol2 : `vol${i}` })
      for (let i = 0; i < 12; i++) r[`port${i}`] = test_({ value: { list_join: ['/', [attr(`subnet${i % 4}`), attr(`sg${i % 4}`)]] }, ...(v.replace && (i === 3 || i === 7) ? { update_replace: true } : {}) })
      for (let i = 0; i < 12; i++) r[`server${i}`] = test_({ value: { list_join: ['/', [attr(`port${i}`), attr(`volume${i % 8}`)]] }, ...(v.replace && i === 5 ? { update_replace: true } : {}) })
      r.lb = test_({ value: { list_join: [',', Array.from({ length: 12 }, (_, i) => attr(`server${i}`))] } })
      for (let i = 0; i < 3; i++) r[`member${i}`] = test_({ value: attr('lb') })
      for (let i = 0; i < 4; i++) r[`dns${i}`] = test_({ value: `record${i}` })
      return hot(r)
    }
    const v1 = t({ net: 'net-a', sg1: 'sg1', vol2: 'vol2', replace: false })
    expect(Object.keys(v1.resources as object)).toHaveLength(49)
    const id = await create('forty-nine', v1)
    const v2 = t({ net: 'net-b', sg1: 'sg1-b', vol2: 'vol2-b', replace: true })
    const p = await preview(id, v2)
    expect(p.summary).toEqual({ create: 0, update: 32, replace: 3, delete: 0, unchanged: 14, uncertain: 29 })
    expect(p.items.filter((i) => i.action === 'replace').map((i) => `${i.name}: ${i.reason}`)).toEqual(['port3: update_replace is set', 'port7: update_replace is set', 'server5: update_replace is set'])
    const did = await applyAndCompare(id, p, v2)
    const count = (a: string) => [...did.values()].filter((x) => x === a).length
    expect({ update: count('update'), replace: count('replace') }).toEqual({ update: 32, replace: 3 })
  })
})
