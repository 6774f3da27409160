/**
 * The conformance kit: what the engine relies on of a resource type, checked
 * by running the type's actions against the real thing (`npx kiln-types-test`
 * for a provider; test/resources/conformance.test.ts for every built-in type
 * and the example provider).
 *
 *   idempotent create   the same action asked twice (one row, one traversal:
 *                       a retry, a lost answer) makes one object
 *   observe agrees      what observe reports of a new object is what create
 *                       was given
 *   adopt agrees        adopting the object reports what observe does
 *   secrets stay secret no attribute that is not secret holds a secret
 *                       property's value
 *   abort is honoured   an action aborted mid-way settles promptly and leaves
 *                       nothing a delete cannot remove
 *   delete when gone    deleting twice succeeds, and observe then says gone
 *
 * A check that does not apply (a state-only type has nothing outside Kiln to
 * make twice; a type without observe or adopt) is skipped, saying why.
 */
import crypto from 'node:crypto'
import { validateProperties } from './schema'
import type { PropertySchema, ResourceContext, ResourceState, ResourceType } from './types'

export type Outcome = 'pass' | 'fail' | 'skip'

export interface CheckResult {
  type: string
  check: string
  outcome: Outcome
  detail: string
}

export interface ConformanceOptions {
  /** A context for one row of one traversal, whose action stops when `signal` fires. */
  context(row: { uuid: string; traversalId: string; name: string }, signal: AbortSignal): ResourceContext
  /** Properties to create with (default: made from the schema: defaults, and a sample for what is required). */
  properties?: Record<string, unknown>
  /** How long an aborted action may take to settle. */
  abortSettleMs?: number
}

const CHECKS = ['idempotent create', 'observe agrees with create', 'adopt agrees with observe', 'secrets stay secret', 'abort is honoured', 'delete of what is gone succeeds'] as const

/** Properties the schema accepts: defaults, and a sample of each required one. */
export function sampleProperties(schema: Record<string, PropertySchema>, tag: string): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [k, s] of Object.entries(schema)) {
    if (s.default !== undefined) out[k] = s.default
    else if (s.required || s.secret) out[k] = sample(s, `${tag}-${k}`)
  }
  return out
}

function sample(s: PropertySchema, tag: string): unknown {
  const allowed = s.constraints?.find((c) => 'allowed_values' in c)
  if (allowed && 'allowed_values' in allowed) return allowed.allowed_values[0]
  switch (s.type) {
    case 'integer':
    case 'number': {
      const range = s.constraints?.find((c) => 'range' in c)
      return range && 'range' in range ? (range.range.min ?? 1) : 1
    }
    case 'boolean':
      return false
    case 'map':
      return {}
    case 'list':
      return []
    default:
      return tag.replace(/[^a-z0-9-]/gi, '-').toLowerCase()
  }
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b)

/** Run every check on `t`; never throws for what the type does. */
export async function checkType(t: ResourceType, opts: ConformanceOptions): Promise<CheckResult[]> {
  const results: CheckResult[] = []
  const record = (check: (typeof CHECKS)[number], outcome: Outcome, detail: string) => results.push({ type: t.name, check, outcome, detail })
  const tag = `kiln-conformance-${crypto.randomBytes(3).toString('hex')}`
  // As the engine gives them: checked against the schema, with its defaults.
  const props = validateProperties(t.properties, opts.properties ?? sampleProperties(t.properties, tag), { acceptUnknown: t.acceptsAnyProperties === true }).value
  const row = () => ({ uuid: crypto.randomUUID(), traversalId: crypto.randomUUID(), name: `${tag}-${results.length}` })
  const live = new AbortController().signal
  const attempt = async <T>(fn: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: string }> => {
    try {
      return { ok: true, value: await fn() }
    } catch (err) {
      return { ok: false, error: err instanceof Error ? err.message : String(err) }
    }
  }

  // One object for the checks that look at it.
  const r = row()
  const ctx = opts.context(r, live)
  const first = await attempt(() => t.create(ctx, props))
  if (!first.ok) {
    for (const c of CHECKS) record(c, 'fail', `create failed: ${first.error}`)
    return results
  }
  const state: ResourceState = { physicalId: first.value.physicalId ?? ctx.physicalName, properties: props, attributes: first.value.attributes ?? {}, data: first.value.data ?? {} }

  if (t.stateOnly) record('idempotent create', 'skip', 'state-only: nothing outside Kiln to make twice')
  else {
    const again = await attempt(() => t.create(opts.context(r, live), props))
    if (!again.ok) record('idempotent create', 'fail', `the same create asked again failed: ${again.error}`)
    else if ((again.value.physicalId ?? ctx.physicalName) !== state.physicalId) record('idempotent create', 'fail', `asked again, it made ${String(again.value.physicalId)} besides ${String(state.physicalId)}`)
    else record('idempotent create', 'pass', `one object (${String(state.physicalId)})`)
  }

  let seen: Record<string, unknown> | null = null
  if (!t.observe) record('observe agrees with create', 'skip', 'the type has no observe')
  else {
    const o = await attempt(() => t.observe!(opts.context(r, live), state))
    if (!o.ok) record('observe agrees with create', 'fail', `observe failed: ${o.error}`)
    else if (o.value.state === 'gone') record('observe agrees with create', 'fail', 'observe says the new object is gone')
    else {
      seen = o.value.properties
      const differ = Object.keys(seen).filter((k) => k in props && !same(seen![k], props[k]))
      record('observe agrees with create', differ.length ? 'fail' : 'pass', differ.length ? `observed differently: ${differ.map((k) => `${k} ${JSON.stringify(seen![k])} (created with ${JSON.stringify(props[k])})`).join('; ')}` : `${Object.keys(seen).length} properties as created`)
    }
  }

  if (!t.adopt) record('adopt agrees with observe', 'skip', 'the type cannot adopt')
  else if (!seen) record('adopt agrees with observe', 'skip', 'nothing observed to compare with')
  else {
    const a = await attempt(() => t.adopt!(opts.context(r, live), String(state.physicalId), { dryRun: true }))
    if (!a.ok) record('adopt agrees with observe', 'fail', `adopt failed: ${a.error}`)
    else {
      const differ = Object.keys(seen).filter((k) => k in a.value.properties && !same(a.value.properties[k], seen![k]))
      record('adopt agrees with observe', differ.length ? 'fail' : 'pass', differ.length ? `adopt and observe differ on ${differ.join(', ')}` : 'the same properties')
    }
  }

  const secrets = Object.entries(t.properties).filter(([k, s]) => s.secret && typeof props[k] === 'string' && String(props[k]).length >= 4).map(([k]) => String(props[k]))
  if (!secrets.length) record('secrets stay secret', 'skip', 'no secret property')
  else {
    const plain = Object.entries(state.attributes).filter(([k]) => !t.attributes[k]?.secret)
    const leaks = plain.filter(([, v]) => secrets.some((s) => JSON.stringify(v ?? null).includes(s))).map(([k]) => k)
    record('secrets stay secret', leaks.length ? 'fail' : 'pass', leaks.length ? `attributes ${leaks.join(', ')} hold a secret property's value and are not declared secret` : `${plain.length} plain attributes hold none`)
  }

  // Abort: a create stopped as soon as it starts settles promptly, and its delete leaves nothing.
  if (t.stateOnly) record('abort is honoured', 'skip', 'state-only: nothing outside Kiln to leave behind')
  else {
    const ar = row()
    const ac = new AbortController()
    const actx = opts.context(ar, ac.signal)
    const limit = opts.abortSettleMs ?? 15_000
    const started = Date.now()
    const running = attempt(() => t.create(actx, props))
    ac.abort(new Error('aborted by the conformance kit'))
    const settled = await Promise.race([running.then((x) => ({ x })), new Promise<null>((res) => setTimeout(() => res(null), limit))])
    if (settled === null) record('abort is honoured', 'fail', `an aborted create had not settled after ${limit} ms`)
    else {
      const made = settled.x.ok ? settled.x.value.physicalId ?? actx.physicalName : null
      const cleanup = await attempt(() => t.delete(opts.context(ar, live), { physicalId: made, properties: props, attributes: {}, data: {} }))
      record('abort is honoured', cleanup.ok ? 'pass' : 'fail', cleanup.ok ? `settled in ${Date.now() - started} ms (${settled.x.ok ? 'finished' : 'stopped'}); its delete succeeded` : `its delete failed: ${cleanup.error}`)
    }
  }

  const d1 = await attempt(() => t.delete(opts.context(r, live), state))
  const d2 = d1.ok ? await attempt(() => t.delete(opts.context(r, live), state)) : d1
  if (!d1.ok) record('delete of what is gone succeeds', 'fail', `delete failed: ${d1.error}`)
  else if (!d2.ok) record('delete of what is gone succeeds', 'fail', `a second delete failed: ${d2.error}`)
  else if (t.observe && !t.stateOnly) {
    const o = await attempt(() => t.observe!(opts.context(r, live), state))
    const gone = o.ok && o.value.state === 'gone'
    // A type with nothing outside Kiln to look at reports what is stored, whatever happened (observeStored).
    const asStored = o.ok && o.value.state === 'exists' && same(o.value.properties, state.properties) && same(o.value.attributes, state.attributes)
    if (gone || asStored) record('delete of what is gone succeeds', 'pass', gone ? 'deleted twice; observe says gone' : 'deleted twice; observe reports what is stored (nothing outside Kiln to look at)')
    else record('delete of what is gone succeeds', 'fail', `after delete, observe says ${o.ok ? o.value.state : `(failed: ${o.error})`}`)
  } else record('delete of what is gone succeeds', 'pass', 'deleted twice')
  return results
}
