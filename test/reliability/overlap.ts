/**
 * The overlap driver (overlap.test.ts, short; `npm run overlap`, long): many
 * stacks at once, each sent k updates (k up to 10) in quick succession with
 * random templates — resources added and removed, values changed, now and
 * then a change that forces a replacement. Each update supersedes the one
 * before while it runs. Checked afterwards, per stack: the final state equals
 * the last template, and no resource was replaced or updated more often than
 * the sequence of templates made necessary.
 */
import type { TestCluster } from '../helpers/cluster'

export interface OverlapOptions {
  stacks: number
  maxUpdates: number
  /** max milliseconds between two submissions of one stack */
  gapMs: number
  seed?: number
}

export interface OverlapReport {
  stacks: number
  updates: number
  replacements: number
  allowedReplacements: number
  inPlaceUpdates: number
  allowedInPlaceUpdates: number
  violations: string[]
}

interface Spec {
  [name: string]: { value: string; key: string; deps: string[]; wait: number }
}

/** A small deterministic PRNG, so a failing run can be replayed from its seed. */
function prng(seed: number) {
  let s = seed >>> 0 || 1
  return (n: number) => {
    s ^= s << 13
    s ^= s >>> 17
    s ^= s << 5
    return (s >>> 0) % n
  }
}

function toTemplate(spec: Spec): string {
  const resources: Record<string, unknown> = {}
  for (const [name, r] of Object.entries(spec)) {
    resources[name] = {
      type: 'OS::Heat::TestResource',
      properties: { value: r.value, update_replace_value: r.key, wait_secs: r.wait },
      ...(r.deps.length ? { depends_on: r.deps } : {}),
    }
  }
  return JSON.stringify({ heat_template_version: '2018-08-31', resources })
}

function mutate(prev: Spec, step: number, rnd: (n: number) => number): Spec {
  const next: Spec = {}
  const names = Object.keys(prev)
  for (const name of names) {
    if (names.length > 2 && rnd(8) === 0) continue // removed
    const r = prev[name]!
    next[name] = {
      value: rnd(2) ? `${name}-v${step}` : r.value,
      key: rnd(7) === 0 ? `${name}-k${step}` : r.key,
      deps: r.deps.filter(() => true),
      wait: rnd(4) / 10,
    }
  }
  if (rnd(3) === 0) {
    const name = `n${step}x${rnd(1000)}`
    next[name] = { value: `${name}-v${step}`, key: 'k0', deps: [], wait: rnd(3) / 10 }
  }
  // dependencies only on resources that still exist, and only "backwards" (no cycles)
  const order = Object.keys(next)
  order.forEach((name, i) => {
    const r = next[name]!
    r.deps = r.deps.filter((d) => d in next && order.indexOf(d) < i)
    if (i > 0 && rnd(3) === 0) {
      const d = order[rnd(i)]!
      if (!r.deps.includes(d)) r.deps.push(d)
    }
  })
  return next
}

export async function runOverlap(c: TestCluster, o: OverlapOptions): Promise<OverlapReport> {
  const seed = o.seed ?? Date.now()
  const report: OverlapReport = { stacks: o.stacks, updates: 0, replacements: 0, allowedReplacements: 0, inPlaceUpdates: 0, allowedInPlaceUpdates: 0, violations: [] }
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

  await Promise.all(
    Array.from({ length: o.stacks }, async (_, i) => {
      const rnd = prng(seed * 1000 + i + 1) // one stream per stack: the run replays from its seed
      const name = `overlap-${seed}-${i}`
      let spec: Spec = {}
      for (let k = 0; k < 3 + rnd(4); k++) spec[`r${k}`] = { value: `r${k}-v0`, key: 'k0', deps: k > 0 && rnd(2) ? [`r${rnd(k)}`] : [], wait: 0 }
      const id = (await c.services.create(c.actor, { name, template: toTemplate(spec) })).stack.id
      if ((await c.settle(id)) !== 'CREATE_COMPLETE') return void report.violations.push(`${name}: create failed`)
      const sequence: Spec[] = [spec]
      const k = 2 + rnd(o.maxUpdates - 1)
      for (let u = 1; u <= k; u++) {
        spec = mutate(spec, u, rnd)
        await c.services.update(c.actor, id, { template: toTemplate(spec) })
        sequence.push(spec)
        report.updates++
        await sleep(rnd(o.gapMs))
      }
      const final = await c.settle(id, 120_000)
      const v = (m: string) => report.violations.push(`${name} (seed ${seed}): ${m}`)
      if (final !== 'UPDATE_COMPLETE') v(`ended ${final}`)

      // The final state is the last template.
      const live = (await c.rows(id)).filter((r) => !(r.action === 'DELETE' && r.status === 'COMPLETE'))
      const byName = new Map(live.map((r) => [r.name, r]))
      if (live.length !== byName.size) v(`two live rows for one resource: ${live.map((r) => r.name).join(',')}`)
      const want = Object.keys(spec).sort()
      if (JSON.stringify([...byName.keys()].sort()) !== JSON.stringify(want)) v(`rows ${[...byName.keys()].sort()} != last template ${want}`)
      for (const [rname, r] of Object.entries(spec)) {
        const props = byName.get(rname)?.properties as Record<string, unknown> | undefined
        if (props && (props.value !== r.value || props.update_replace_value !== r.key)) v(`${rname} holds ${props.value}/${props.update_replace_value}, template says ${r.value}/${r.key}`)
      }

      // Never acted on more often than necessary: a resource is replaced at most as often as
      // its replace-forcing key changed along the sequence, and updated in place at most as
      // often as its value changed (a superseded template may be skipped, never repeated).
      // (replaced rows are purged once deleted, so replacements are counted from their events)
      const { rows: replaced } = await c.db.pool.query(
        `SELECT resource_name AS name, count(*)::int AS n FROM event WHERE stack_id = $1 AND data ? 'replaced_by' GROUP BY resource_name`,
        [id],
      )
      const { rows: updates } = await c.db.pool.query(
        `SELECT resource_name AS name, count(*)::int AS n FROM event WHERE stack_id = $1 AND kind = 'resource' AND action = 'UPDATE' AND status = 'IN_PROGRESS' GROUP BY resource_name`,
        [id],
      )
      const replacedCount = new Map(replaced.map((r) => [String(r.name), Number(r.n)]))
      const inPlace = new Map(updates.map((r) => [String(r.name), Number(r.n)]))
      const names = new Set(sequence.flatMap((s) => Object.keys(s)))
      for (const rname of names) {
        let keyChanges = 0
        let valueChanges = 0
        let prev: Spec[string] | undefined
        for (const s of sequence) {
          const cur = s[rname]
          if (cur && prev && cur.key !== prev.key) keyChanges++
          if (cur && prev && (cur.value !== prev.value || cur.wait !== prev.wait)) valueChanges++
          prev = cur
        }
        const replacements = replacedCount.get(rname) ?? 0
        report.replacements += replacements
        report.allowedReplacements += keyChanges
        report.inPlaceUpdates += inPlace.get(rname) ?? 0
        report.allowedInPlaceUpdates += valueChanges + keyChanges
        if (replacements > keyChanges) v(`${rname} replaced ${replacements} time(s); its key changed ${keyChanges} time(s)`)
        if ((inPlace.get(rname) ?? 0) > valueChanges + keyChanges) v(`${rname} updated in place ${inPlace.get(rname)} time(s); it changed ${valueChanges + keyChanges} time(s)`)
      }
    }),
  )
  return report
}
