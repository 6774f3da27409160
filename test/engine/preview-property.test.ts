/**
 * The preview against what really happens, over random template pairs
 * (fast-check, fixed seed), on real worker processes: for each pair the
 * stack is created from the first template, the second is previewed, then
 * applied, and the traversal's events are compared with the preview:
 *   - what it created, replaced or deleted is what the preview said it will
 *     create, replace or delete (or, for a replacement, said it may);
 *   - every resource it updated in place was marked will or may update;
 *   - nothing marked unchanged was touched.
 * Templates chain OS::Heat::TestResource (and OS::Heat::None) through
 * get_attr, get_resource and list_join; the second template changes values
 * and references, sets update_replace, changes a property that cannot be
 * updated, changes a type, slows an update without changing its output,
 * drops resources and adds others.
 */
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { TestCluster } from '../helpers/cluster'
import { testDatabase, type TestDatabase } from '../helpers/db'
import { disagreements, liveNames, whatItDid } from '../helpers/preview-check'
import { createPlanService } from '../../lib/services/plans'
import { builtinTypes, createRegistry, typeCatalog } from '../../lib/resources/registry'
import type { PreviewResult } from '../../lib/plan/preview-types'

let db: TestDatabase
let c: TestCluster

beforeAll(async () => {
  db = await testDatabase()
  c = await TestCluster.start(db.url, { workers: 2 })
}, 120_000)

afterAll(async () => {
  await c?.stop()
  await db?.drop()
})

type Expr = { lit: string } | { attr: number } | { id: number } | { join: Expr[] }
interface Res {
  none: boolean
  value: Expr
  replaceValue: string
  updateReplace: boolean
  wait: number
}

/** An expression over resources below `i` (references only go down: no cycle). */
const expr = (i: number): fc.Arbitrary<Expr> => {
  const leaf: fc.Arbitrary<Expr>[] = [fc.constantFrom('a', 'b', 'c').map((lit) => ({ lit }))]
  if (i > 0) leaf.push(fc.integer({ min: 0, max: i - 1 }).map((attr) => ({ attr })), fc.integer({ min: 0, max: i - 1 }).map((id) => ({ id })))
  const one = fc.oneof(...leaf)
  return fc.oneof({ weight: 3, arbitrary: one }, { weight: 1, arbitrary: fc.array(one, { minLength: 2, maxLength: 3 }).map((join) => ({ join })) })
}

const resource = (i: number): fc.Arbitrary<Res> =>
  fc.record({ none: fc.constant(false), value: expr(i), replaceValue: fc.constantFrom('p', 'q'), updateReplace: fc.constantFrom(false, false, false, true), wait: fc.constant(0) })

/** How the second template treats a resource of the first. */
const mutation = (i: number) =>
  fc.record({
    value: fc.option(expr(i), { freq: 3 }),
    replaceValue: fc.option(fc.constantFrom('p', 'q'), { freq: 4 }),
    updateReplace: fc.option(fc.boolean(), { freq: 5 }),
    none: fc.option(fc.boolean(), { freq: 8 }),
    wait: fc.option(fc.constantFrom(0, 0.01), { freq: 4 }),
  })

const pair = fc
  .integer({ min: 2, max: 6 })
  .chain((n) =>
    fc.record({
      v1: fc.tuple(...Array.from({ length: n }, (_, i) => resource(i))),
      changes: fc.tuple(...Array.from({ length: n }, (_, i) => mutation(i))),
      drop: fc.integer({ min: 0, max: Math.min(2, n - 1) }),
      add: fc.array(fc.constant(null), { maxLength: 2 }),
    }),
  )
  .chain(({ v1, changes, drop, add }) => {
    const kept = v1.slice(0, v1.length - drop).map((r, i) => {
      const m = changes[i]!
      return { none: m.none ?? r.none, value: m.value ?? r.value, replaceValue: m.replaceValue ?? r.replaceValue, updateReplace: m.updateReplace ?? r.updateReplace, wait: m.wait ?? r.wait }
    })
    // References into dropped resources point at kept ones instead.
    const clamp = (e: Expr): Expr => ('attr' in e ? { attr: Math.min(e.attr, kept.length - 1) } : 'id' in e ? { id: Math.min(e.id, kept.length - 1) } : 'join' in e ? { join: e.join.map(clamp) } : e)
    const v2 = kept.map((r) => ({ ...r, value: clamp(r.value) }))
    return fc.tuple(fc.constant(v1 as Res[]), fc.tuple(...add.map((_, k) => resource(v2.length + k))).map((extra) => [...v2, ...extra]))
  })

function render(list: Res[]): Record<string, unknown> {
  const ref = (e: Expr): unknown => {
    if ('lit' in e) return e.lit
    if ('join' in e) return { list_join: ['-', e.join.map(ref)] }
    const i = 'attr' in e ? e.attr : e.id
    // OS::Heat::None has no `output`: read its id instead.
    return 'attr' in e && !list[i]!.none ? { get_attr: [`r${i}`, 'output'] } : { get_resource: `r${i}` }
  }
  const resources = Object.fromEntries(
    list.map((r, i) => [
      `r${i}`,
      {
        type: r.none ? 'OS::Heat::None' : 'OS::Heat::TestResource',
        properties: { value: ref(r.value), update_replace_value: r.replaceValue, ...(r.updateReplace ? { update_replace: true } : {}), ...(r.wait ? { wait_secs: r.wait } : {}) },
      },
    ]),
  )
  return { heat_template_version: '2018-08-31', resources }
}

describe('preview property', () => {
  test('over random template pairs, the preview agrees with what the traversal does', async () => {
    const registry = createRegistry(builtinTypes())
    const plans = createPlanService({ db: c.db, catalog: typeCatalog(registry), types: registry, limits: { maxTemplateBytes: 1 << 20, maxResourcesPerStack: 100 }, ttlMs: 60_000 }, c.services)
    let run = 0
    const seen = { replace: 0, update: 0, create: 0, delete: 0, unchanged: 0, uncertain: 0 }
    await fc.assert(
      fc.asyncProperty(pair, async ([v1, v2]) => {
        const name = `prop-${run++}`
        const created = await c.services.create(c.actor, { name, template: render(v1) })
        expect(await c.settle(created.stack.id)).toBe('CREATE_COMPLETE')
        // A saved plan: the preview as the API stores it, and then applied exactly.
        const plan = await plans.create(c.actor, created.stack.id, { template: render(v2) })
        const preview: PreviewResult = plan.preview
        for (const i of preview.items) {
          seen[i.action]++
          if (!i.certain) seen.uncertain++
        }
        const before = await liveNames(c.db.pool, created.stack.id)
        const applied = await plans.apply(c.actor, created.stack.id, plan.id)
        expect(await c.settle(created.stack.id)).toBe('UPDATE_COMPLETE')
        const did = await whatItDid(c.db.pool, applied.traversalId!, before)
        expect(disagreements(preview, did), JSON.stringify({ v1: render(v1), v2: render(v2), preview: preview.items }, null, 1)).toEqual([])
        await c.services.delete(c.actor, created.stack.id)
      }),
      { seed: 20261125, numRuns: 60, endOnFailure: true },
    )
    // The pairs exercised every kind of answer.
    for (const k of Object.keys(seen) as (keyof typeof seen)[]) expect(seen[k], k).toBeGreaterThan(0)
  }, 300_000)
})
