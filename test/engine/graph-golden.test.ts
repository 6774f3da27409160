/**
 * Golden tests of the traversal graph builder (lib/engine/graph.ts), as
 * Terraform tests its graphs: each case of test/engine/graph-golden/ gives a
 * stack's rows (an old template, created, or rows listed by hand) and the
 * template a traversal converges to; the graph startTraversal would store is
 * rendered as canonical DOT and compared with the case's expected.dot.
 * A case taken from Heat's convergence scenarios is also compared with the
 * graph Heat itself built (Appendix A of the reference), row ids aside.
 *
 * No database: `npx vitest run --config test/engine/graph-golden/vitest.config.ts`
 * runs these alone without starting PostgreSQL. UPDATE_GOLDEN=1 writes the
 * expected files instead of comparing (README.md in the folder).
 */
import fs from 'node:fs'
import path from 'node:path'
import { describe, expect, test } from 'vitest'
import { buildCase, type BuiltCase, caseNames, comparableHeat, comparableKiln, loadCase, renderDot } from './graph-golden/harness'

// eslint-disable-next-line no-restricted-properties -- two switches of this suite alone, read once here (lib/env.ts parses the application's settings)
const { UPDATE_GOLDEN, CI } = process.env
const on = (v: string | undefined) => ['1', 'true', 'yes'].includes((v ?? '').toLowerCase())
const updating = on(UPDATE_GOLDEN)

/** Heat's 21 convergence scenarios (reference §7.3): each has its traversals among the cases. */
const HEAT_SCENARIOS = [
  'basic_create', 'basic_create_rollback', 'basic_update_delete', 'create_early_delete', 'disjoint_create', 'multiple_update',
  'update_add', 'update_add_concurrent', 'update_add_rollback', 'update_add_rollback_early', 'update_interrupt_create',
  'update_remove', 'update_remove_rollback', 'update_replace', 'update_replace_invert_deps', 'update_replace_missed_cleanup',
  'update_replace_missed_cleanup_delete', 'update_replace_rollback', 'update_user_replace', 'update_user_replace_rollback',
  'update_user_replace_rollback_update',
]

const CASE_FILES = new Set(['case.yaml', 'old.yaml', 'new.yaml', 'expected.dot'])

const cases = caseNames().map(loadCase)

test('expected files are written only on request, and never in CI', () => {
  // Written goldens are reviewed by hand and committed; CI compares, whatever it is asked.
  expect(updating && on(CI), 'UPDATE_GOLDEN is refused when CI is set').toBe(false)
})

test("every one of Heat's 21 scenarios has its traversals among the cases", () => {
  const covered = new Set(cases.flatMap((c) => (c.spec.heat ?? []).map((h) => h.scenario)))
  expect(HEAT_SCENARIOS.filter((s) => !covered.has(s))).toEqual([])
  expect([...covered].filter((s) => !HEAT_SCENARIOS.includes(s))).toEqual([])
})

describe.each(cases)('$name', (c) => {
  let built: BuiltCase | undefined
  const graph = () => (built ??= buildCase(c))

  test('has only the files a case has', () => {
    expect(fs.readdirSync(c.dir).filter((f) => !CASE_FILES.has(f))).toEqual([])
  })

  test('renders as expected.dot', () => {
    const dot = renderDot(graph())
    const file = path.join(c.dir, 'expected.dot')
    if (updating && !on(CI)) {
      fs.writeFileSync(file, dot)
      return
    }
    if (!fs.existsSync(file)) {
      expect.fail(`${c.name}/expected.dot is missing: write it with UPDATE_GOLDEN=1 (README.md), review it by hand, and commit it`)
    }
    expect(dot).toBe(fs.readFileSync(file, 'utf8'))
  })

  for (const ref of c.spec.heat ?? []) {
    test(`is the graph Heat built in ${ref.scenario} ${ref.traversal}`, () => {
      expect(comparableKiln(graph())).toEqual(comparableHeat(ref))
    })
  }
})
