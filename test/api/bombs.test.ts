/**
 * The adversarial review's submit-time reproductions over real HTTP: each is
 * refused with a 4xx naming the budget or limit it hit (never a 5xx), nothing
 * is written, the web's event loop answers /api/health while a bomb is being
 * evaluated (held at a gate on its evaluation thread), and a read of a stack
 * evaluates its outputs, not its resources.
 */
import { beforeAll, describe, expect, test } from 'vitest'
import { deepJson, manyResources, nestedRepeat, redosPattern, uniqueSplit, wideRepeat } from '../../bench/bomb-templates'
import { configureEvaluation, type EvaluationHooks } from '../../lib/evaluation/pool'
import { DEFAULT_EVALUATION_SETTINGS, type EvaluationSettings } from '../../lib/evaluation/settings'
import { useKilnEnv } from '../helpers/stack-env'

/** Open (1) unless a test closes it: a task taken up by an evaluation thread waits while it is 0. */
const gate = new Int32Array(new SharedArrayBuffer(4))
const startedKinds: string[] = []
let onStarted: (() => void) | null = null
const hooks: EvaluationHooks = {
  gate,
  started(kind) {
    startedKinds.push(kind)
    onStarted?.()
  },
}
// A generous time limit: a test may hold a task at the gate while it checks something else.
const settings: EvaluationSettings = { ...DEFAULT_EVALUATION_SETTINGS, timeoutMs: 120_000 }

beforeAll(async () => {
  Atomics.store(gate, 0, 1)
  configureEvaluation(settings, hooks)
})
// After the evaluation settings: the server starts with them in place.
const { cluster: c, api } = useKilnEnv({ cluster: { workers: 1 } })

const stackCount = async () => Number((await c.db.pool.query('SELECT count(*) FROM stack')).rows[0].count)

describe('submitted bombs', () => {
  test('each is refused with a 4xx naming its budget or limit, and nothing is written', async () => {
    const before = await stackCount()
    const post = (name: string, template: string) => api.call('POST', '/api/stacks', { body: { name, template } })

    const repeat = await post('nested-repeat', nestedRepeat(6, 20))
    expect(repeat.status).toBe(400)
    expect(repeat.body.error).toMatchObject({ code: 'budget_exceeded', budget: { kind: 'operations', setting: 'KILN_TEMPLATE_EVAL_MAX_OPS', max: 1_000_000 } })
    expect(repeat.body.error.message).toContain('KILN_TEMPLATE_EVAL_MAX_OPS')
    expect(repeat.body.error.issues[0].path).toBe('resources.bomb.properties.value.repeat.template.l.repeat.template.l.repeat')

    const wide = await post('wide-repeat', wideRepeat(1_000_000))
    expect(wide.status).toBe(400)
    expect(wide.body.error.budget.setting).toBe('KILN_TEMPLATE_EVAL_MAX_OPS')

    const deep = await post('deep', deepJson(4000))
    expect(deep.status).toBe(400)
    expect(deep.body.error.budget).toEqual({ kind: 'depth', setting: 'KILN_TEMPLATE_EVAL_MAX_DEPTH', max: 100 })

    // Counted first: a bomb among too many resources is never evaluated (this server allows 500).
    const resources = JSON.parse(manyResources(501)).resources
    resources.r0 = JSON.parse(nestedRepeat(6, 20)).resources.bomb
    const many = await post('many', JSON.stringify({ heat_template_version: '2018-08-31', resources }))
    expect(many.status).toBe(413)
    expect(many.body.error).toMatchObject({ code: 'limit_exceeded', limit: 'resources_per_stack', max: 500 })

    const redos = await post('redos', redosPattern(40))
    expect(redos.status).toBe(400)
    expect(redos.body.error.issues[0]).toMatchObject({ code: 'constraint', path: 'parameters.p.default' })

    const ahead = await post('lookahead', JSON.stringify({ heat_template_version: '2018-08-31', parameters: { p: { type: 'string', default: 'x', constraints: [{ allowed_pattern: '(?!y)x' }] } }, resources: {} }))
    expect(ahead.status).toBe(400)
    expect(ahead.body.error.issues[0]).toMatchObject({ path: 'parameters.p.constraints[0].allowed_pattern', message: expect.stringMatching(/Parameter 'p'.*lookahead/) })

    // The same through validate, preview and Heat's API.
    expect((await api.call('POST', '/api/templates/validate', { body: { template: nestedRepeat(6, 20) } })).body.error.code).toBe('budget_exceeded')
    const heat = await api.call('POST', `/v1/${api.a.projectId}/stacks`, { body: { stack_name: 'heat-bomb', template: deepJson(4000) } })
    expect(heat.status).toBe(400)
    expect(heat.body.error.message).toContain('KILN_TEMPLATE_EVAL_MAX_DEPTH')
    expect(await stackCount()).toBe(before)

    const ok = await post('previewed', JSON.stringify({ heat_template_version: '2018-08-31', resources: { r: { type: 'OS::Heat::None' } } }))
    expect(ok.status).toBe(201)
    expect(await c.settle(ok.body.stack.id)).toBe('CREATE_COMPLETE')
    const preview = await api.call('POST', `/api/stacks/${ok.body.stack.id}/preview`, { body: { template: nestedRepeat(6, 20) } })
    expect(preview.status).toBe(400)
    expect(preview.body.error.budget.setting).toBe('KILN_TEMPLATE_EVAL_MAX_OPS')
  })

  test('/api/health answers while a bomb is being evaluated (held at a gate on its evaluation thread)', async () => {
    Atomics.store(gate, 0, 0)
    const taken = new Promise<void>((r) => (onStarted = r))
    const bomb = api.call('POST', '/api/stacks', { body: { name: 'held', template: nestedRepeat(6, 20) } })
    try {
      await taken
      // The evaluation is under way on its thread; the web's event loop is free to answer.
      const health = await api.call('GET', '/api/health', { token: null })
      expect(health.status).toBe(200)
      const list = await api.call('GET', '/api/stacks')
      expect(list.status).toBe(200)
    } finally {
      onStarted = null
      Atomics.store(gate, 0, 1)
      Atomics.notify(gate, 0)
    }
    const refused = await bomb
    expect(refused.status).toBe(400)
    expect(refused.body.error.code).toBe('budget_exceeded')
  })
})

describe('reads', () => {
  test("GET /api/stacks/{id} evaluates the stored template's outputs, not its resources", async () => {
    // 20,000 items through list_concat_unique: its resource takes about 90,000 operations to evaluate.
    const created = await api.call('POST', '/api/stacks', { body: { name: 'stored', template: uniqueSplit(20_000) } })
    expect(created.status).toBe(201)
    expect(await c.settle(created.body.stack.id)).toBe('CREATE_COMPLETE')
    const { rows } = await c.db.pool.query(`SELECT physical_id FROM resource WHERE stack_id = $1 AND name = 'r'`, [created.body.stack.id])
    startedKinds.length = 0
    // A budget the resource's evaluation would spend many times over; the outputs need a few operations.
    configureEvaluation({ ...settings, limits: { ...settings.limits, maxOps: 5_000 }, inlineOps: 100 }, hooks)
    try {
      for (let i = 0; i < 2; i++) {
        const show = await api.call('GET', `/api/stacks/${created.body.stack.id}`)
        expect(show.status).toBe(200)
        expect(show.body.stack.outputs).toEqual({ id: { value: rows[0].physical_id } })
      }
      // Within the inline allowance: no evaluation thread was needed for the reads.
      expect(startedKinds).toEqual([])
    } finally {
      configureEvaluation(settings, hooks)
    }
  })
})
