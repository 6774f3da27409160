/**
 * No template can stall the evaluator: each of the adversarial review's
 * reproductions (bench/bomb-templates.ts) ends in a refusal naming the budget
 * it spent, or in the right answer computed in linear time, never in a
 * stack overflow or minutes of work. Timing is bench/bombs.ts's business;
 * these tests assert outcomes.
 */
import { describe, expect, test } from 'vitest'
import { deepJson, items, manyResources, nestedRepeat, uniqueSplit, wideRepeat } from '../../bench/bomb-templates'
import { builtinTypes, createRegistry, typeCatalog } from '../../lib/resources/registry'
import { buildDefinition, parseTemplate, resolveProperties, TemplateError, type TemplateIssue } from '../../lib/template'
import { Budget, BudgetExceeded, DEFAULT_EVALUATION_LIMITS } from '../../lib/template/budget'
import { findCycles } from '../../lib/template/cycles'
import { estimateProgramSize } from '../../lib/template/pattern'

const types = typeCatalog(createRegistry(builtinTypes()))
const build = (src: string, opts: { budget?: Budget; parameters?: Record<string, unknown>; maxResources?: number } = {}) => buildDefinition(parseTemplate(src, { maxResources: opts.maxResources }), { types, ...opts })
const hot = (t: Record<string, unknown>) => JSON.stringify({ heat_template_version: '2018-08-31', ...t })

function refusal(fn: () => unknown): BudgetExceeded {
  try {
    fn()
  } catch (err) {
    if (err instanceof BudgetExceeded) return err
    throw err
  }
  throw new Error('expected a BudgetExceeded')
}

function issues(fn: () => unknown): TemplateIssue[] {
  try {
    fn()
  } catch (err) {
    if (err instanceof TemplateError) return err.issues
    throw err
  }
  throw new Error('expected a TemplateError')
}

describe('allowed_pattern runs on RE2', () => {
  test('(a|a)+ against 40 "a" and a "!" is a plain mismatch (JavaScript backtracks for hours)', () => {
    const src = hot({ parameters: { p: { type: 'string', constraints: [{ allowed_pattern: '(a|a)+' }] } }, resources: {} })
    const found = issues(() => build(src, { parameters: { p: 'a'.repeat(40) + '!' } }))
    expect(found).toEqual([expect.objectContaining({ code: 'constraint', path: 'parameters.p', message: expect.stringContaining('does not match pattern "(a|a)+"') })])
    // and a value that matches is accepted
    expect(build(src, { parameters: { p: 'a'.repeat(40) } }).parameters.p).toBe('a'.repeat(40))
  })

  test('lookahead and backreferences are refused, naming the parameter and why', () => {
    const src = hot({
      parameters: {
        ahead: { type: 'string', default: 'x', constraints: [{ allowed_pattern: '(?!/)x' }] },
        back: { type: 'string', default: 'aa', constraints: [{ allowed_pattern: '(a)\\1' }] },
      },
      resources: {},
    })
    const found = issues(() => build(src))
    expect(found.map((i) => i.path)).toEqual(['parameters.ahead.constraints[0].allowed_pattern', 'parameters.back.constraints[0].allowed_pattern'])
    expect(found[0]!.message).toMatch(/Parameter 'ahead'.*no lookahead, lookbehind or backreferences/)
    expect(found[1]!.message).toMatch(/Parameter 'back'/)
  })

  test('a pattern whose program would take seconds to compile is charged first and refused', () => {
    const pattern = '[a-z]{1,1000}'.repeat(600)
    expect(estimateProgramSize(pattern)).toBeGreaterThan(1_000_000)
    const src = hot({ parameters: { p: { type: 'string', default: 'a', constraints: [{ allowed_pattern: pattern }] } }, resources: {} })
    const err = refusal(() => build(src))
    expect(err.budget).toBe('operations')
    expect(err.message).toContain('KILN_TEMPLATE_EVAL_MAX_OPS')
    expect(err.path).toBe('parameters.p.constraints[0].allowed_pattern')
  })

  test('patterns RE2 and Heat share still work', () => {
    const src = hot({ parameters: { name: { type: 'string', default: 'web-01', constraints: [{ allowed_pattern: '[a-z][a-z0-9-]{0,62}' }] } }, resources: {} })
    expect(build(src).parameters.name).toBe('web-01')
    expect(issues(() => build(src, { parameters: { name: 'Web' } }))[0]!.message).toContain('does not match')
  })
})

describe('budgets', () => {
  test('about a kilobyte of nested repeat is refused by the operations budget, at the repeat', () => {
    const src = nestedRepeat(6, 20)
    expect(src.length).toBeLessThan(1500)
    const err = refusal(() => build(src))
    expect(err.budget).toBe('operations')
    expect(err.message).toMatch(/exceeded its budget of 1000000 operations \(KILN_TEMPLATE_EVAL_MAX_OPS\) at resources\.bomb\.properties\.value\.repeat/)
  })

  test('a repeat of 1,000,000 combinations is refused before any copy is made (a stack overflow before)', () => {
    const budget = new Budget(DEFAULT_EVALUATION_LIMITS)
    const err = refusal(() => build(wideRepeat(1_000_000), { budget }))
    expect(err.budget).toBe('operations')
    // The refusal came from counting, not from making copies: no output was charged.
    expect(budget.bytes).toBe(0)
  })

  test('a repeat of 150,000 combinations under a budget that allows it gives every combination', () => {
    const def = build(wideRepeat(150_000), { budget: new Budget({ ...DEFAULT_EVALUATION_LIMITS, maxOps: 5_000_000 }) })
    const value = def.resources.r!.properties.value as string[]
    expect(value).toHaveLength(388 * 387)
    expect(value[0]).toBe('0-0')
    expect(value.at(-1)).toBe('387-386')
  })

  test('list_concat_unique over str_split of 80,000 items is linear: every item once, in order', () => {
    const def = build(uniqueSplit(80_000))
    const value = def.resources.r!.properties.value as string[]
    expect(value).toHaveLength(80_000)
    expect(value.slice(0, 3)).toEqual(['i0', 'i1', 'i2'])
    // Duplicates go, by value (maps with keys in another order are the same value).
    const dup = hot({ resources: { r: { type: 'OS::Heat::None', properties: { v: { list_concat_unique: [[{ a: 1, b: 2 }, 'x', 1], [{ b: 2, a: 1 }, '1', 'x']] } } } } })
    expect(build(dup).resources.r!.properties.v).toEqual([{ a: 1, b: 2 }, 'x', 1, '1'])
  })

  test('a value referenced many times counts each time: a list_join of 1,000 references to 100 kB is refused by the output budget', () => {
    const src = hot({
      parameters: { s: { type: 'string', default: 'y'.repeat(100_000) } },
      resources: { r: { type: 'OS::Heat::None', properties: { v: { list_join: [',', Array.from({ length: 1000 }, () => ({ get_param: 's' }))] } } } },
    })
    const err = refusal(() => build(src))
    expect(err.budget).toBe('output')
    expect(err.message).toContain('KILN_TEMPLATE_EVAL_MAX_OUTPUT_BYTES')
  })

  test('JSON text nested 4,000 deep is refused by the depth budget before anything recurses (a stack overflow before)', () => {
    const err = refusal(() => build(deepJson(4000)))
    expect(err.budget).toBe('depth')
    expect(err.message).toMatch(/nests deeper than 100 levels \(KILN_TEMPLATE_EVAL_MAX_DEPTH\) at resources\.a\.properties\.x\[0\]/)
  })

  test('a json parameter nested 4,000 deep is refused the same way', () => {
    const src = hot({ parameters: { j: { type: 'json' } }, resources: {} })
    const err = refusal(() => build(src, { parameters: { j: '['.repeat(4000) + ']'.repeat(4000) } }))
    expect(err.budget).toBe('depth')
    expect(err.path).toMatch(/^parameters\.j/)
  })

  test('the resource count is checked first: 20,001 resources, one of them a bomb, is a limit issue', () => {
    const resources = JSON.parse(manyResources(20_001)).resources
    resources.r0 = JSON.parse(nestedRepeat(6, 20)).resources.bomb
    const found = issues(() => build(hot({ resources }), { maxResources: 20_000 }))
    expect(found).toEqual([expect.objectContaining({ code: 'limit', path: 'resources', limit: { name: 'resources_per_stack', max: 20_000 } })])
  })

  test('a dependency cycle through 5,000 resources is reported as a cycle (a stack overflow before)', () => {
    const resources: Record<string, unknown> = {}
    for (let i = 0; i < 5000; i++) resources[`r${i}`] = { type: 'OS::Heat::None', depends_on: [`r${(i + 1) % 5000}`] }
    const [cycle] = issues(() => build(hot({ resources })))
    expect(cycle).toMatchObject({ code: 'cycle', path: 'resources.r0' })
    expect(cycle!.cycles![0]).toHaveLength(5000)
    // Every start is tried only while it can still close a circuit: a ring costs its size, not its square.
    const budget = new Budget(DEFAULT_EVALUATION_LIMITS)
    const names = Object.keys(resources)
    findCycles(names, new Map(names.map((n, i) => [n, [`r${(i + 1) % 5000}`]])), 100, budget)
    expect(budget.ops).toBeLessThan(10 * 5000)
  })

  test('map_merge of 300,000 maps merges them (a spread of that many arguments overflowed the stack)', () => {
    const maps = Array.from({ length: 300_000 }, (_, i) => ({ [`k${i % 3}`]: i }))
    const src = hot({ resources: { r: { type: 'OS::Heat::None', properties: { v: { map_merge: maps } } } } })
    expect(build(src, { budget: new Budget({ ...DEFAULT_EVALUATION_LIMITS, maxOps: 5_000_000 }) }).resources.r!.properties.v).toEqual({ k0: 299_997, k1: 299_998, k2: 299_999 })
  })

  test('a chain of conditions longer than the depth budget is refused, not recursed through', () => {
    // c0 needs c1, which needs c2, … : evaluating c0 follows the whole chain.
    const conditions: Record<string, unknown> = {}
    for (let i = 0; i < 4999; i++) conditions[`c${i}`] = { not: `c${i + 1}` }
    conditions.c4999 = true
    const err = refusal(() => build(hot({ conditions, resources: {} })))
    expect(err.budget).toBe('depth')
    expect(err.path).toMatch(/^conditions\.c/)
  })
})

describe('run time', () => {
  const inputs = (n: number) => ({ getResource: () => 'id', getAttr: () => items(n) })

  test("a node's properties are evaluated under the budget: the run-time repeat of n x n copies names the budget and its place", () => {
    const src = hot({
      resources: {
        src: { type: 'OS::Heat::Value', properties: { value: 'x' } },
        bomb: { type: 'OS::Heat::Value', properties: { value: { repeat: { for_each: { '%a%': { str_split: [',', { get_attr: ['src', 'value'] }] }, '%b%': { str_split: [',', { get_attr: ['src', 'value'] }] } }, template: '%a%%b%' } } } },
      },
    })
    const def = build(src)
    const err = refusal(() => resolveProperties(def, 'bomb', inputs(80_000)))
    expect(err.message).toMatch(/KILN_TEMPLATE_EVAL_MAX_OPS\) at resources\.bomb\.properties\.value\.repeat/)
  })

  test('list_concat_unique over a run-time split of 80,000 items is linear', () => {
    const src = hot({ resources: { src: { type: 'OS::Heat::Value', properties: { value: 'x' } }, u: { type: 'OS::Heat::Value', properties: { value: { list_concat_unique: [{ str_split: [',', { get_attr: ['src', 'value'] }] }] } } } } })
    expect((resolveProperties(build(src), 'u', inputs(80_000)).value as string[]).length).toBe(80_000)
  })
})
