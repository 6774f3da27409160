/**
 * The preview's computation: what an update will do to each resource, as the
 * engine will decide it. Pure (runs on an evaluation thread, lib/evaluation).
 *
 * It asks the engine's own questions, with the engine's own code:
 *   - which row each name binds to: chooseRows (lib/engine/graph.ts), as a
 *     traversal's start does;
 *   - create, nothing, update in place or replace: decideNode
 *     (lib/engine/decide.ts), as the worker's node run does: a failed row,
 *     a type change, a property the type cannot update, the type's own
 *     replaceOnUpdate (update_replace);
 *   - what happens to rows the new template no longer binds: decideCleanup.
 *
 * A value is *known after apply* when it depends on the id or an attribute
 * of a resource this update creates, replaces or updates in place: such
 * values are UNKNOWN while resolving the resources after it, so their
 * properties compare as "may change" and the engine's decision is taken both
 * ways (with and without the uncertain properties). When the two answers
 * differ the item is uncertain ("may update", "may replace"), never unchanged.
 *
 * Against an in-flight target: while an update runs, a resource it has not
 * reached yet is compared with what that update will make of it (its target
 * definition, resolved the same way), so a preview describes what the new
 * update changes relative to where the stack is heading.
 */
import { decideCleanup, decideNode, type RowState, type TypeRules, type UpdateDecision } from '../engine/decide'
import { chooseRows } from '../engine/graph'
import type { ExistingRow, ResourceAction, ResourceStatus } from '../engine/types'
import { validateProperties } from '../resources/schema'
import type { PropertySchema, ResourceState } from '../resources/types'
import { resolveOutputs, resolveProperties } from '../template'
import { BudgetExceeded, type Budget } from '../template/budget'
import { Deferred } from '../template/evaluate'
import { UNKNOWN, type PortableDefinition, type ResolveContext, type StackDefinition } from '../template/types'
import type { ConditionChange, OutputChange, PreviewAction, PreviewItem, PreviewResult, PropertyChange } from './preview-types'
import { MASK, redact } from './secrets'
import { compareProperties, compareValues, containsUnknown, valueChanges, type Comparison, type ValueChange } from './value-diff'

/** A live resource row (not DELETE_COMPLETE), as the preview reads it (without the read's row versions). */
/** A live resource row as a preview reads it (lib/db/queries/preview.ts reads it). */
export interface PreviewStateRow {
  id: number
  name: string
  type: string
  action: ResourceAction
  status: ResourceStatus
  physicalId: string | null
  properties: Record<string, unknown> | null
  attributes: Record<string, unknown> | null
  data: Record<string, unknown> | null
  currentTemplateId: string | null
  requires: number[]
  replaces: number | null
  replacedBy: number | null
  deletionPolicy: string
  /** ms since the epoch (the best-row choice's tie-breaker) */
  updatedAt: number
  atomicKey: number
}

export type PreviewRow = Omit<PreviewStateRow, 'atomicKey'>

export type PreviewDefinition = Pick<PortableDefinition, 'resources' | 'outputs'> & Pick<StackDefinition, 'conditions' | 'disabled'>

export interface PreviewInput {
  stack: { id: string; name: string; rawTemplateId: string | null; currentTraversalId: string | null; status: string }
  next: PreviewDefinition
  /** The definition of the template the stack converges to now (null: none). */
  target: PreviewDefinition | null
  rows: PreviewRow[]
  /** Every form of every hidden value (the stack's and the submission's): masked wherever shown. */
  secrets: string[]
}

export type TypeRulesOf = (type: string) => (TypeRules & { acceptsAnyProperties?: boolean }) | undefined

/** Where a name stands before this update: its row as it is, or as the running update will leave it. */
interface Baseline {
  row: RowState
  props: Record<string, unknown>
  state: ResourceState
  /** 'pending': a running update has still to act on it */
  kind: 'actual' | 'pending'
}

/** A resource's values (reference id and attributes) for resolving the resources after it. */
interface Values {
  physicalId: unknown
  attributes: Record<string, unknown>
}

/** No row is at this template: every cleanup decision is taken as for a new traversal's. */
const NEW_TEMPLATE = 'the previewed template'
const MAX_CHANGES = 200

export function topoNames(resources: PortableDefinition['resources']): string[] {
  const names = Object.keys(resources).sort()
  const remaining = new Map(names.map((n) => [n, resources[n]!.dependsOn.filter((d) => d in resources).length]))
  const dependents = new Map<string, string[]>()
  for (const n of names) for (const d of resources[n]!.dependsOn) (dependents.get(d) ?? dependents.set(d, []).get(d)!).push(n)
  const queue = names.filter((n) => remaining.get(n) === 0)
  for (let i = 0; i < queue.length; i++) {
    for (const m of dependents.get(queue[i]!) ?? []) {
      const left = remaining.get(m)! - 1
      remaining.set(m, left)
      if (left === 0) queue.push(m)
    }
  }
  return queue
}

function contextOf(known: Map<string, Values>): ResolveContext {
  return {
    getResource: (n) => (known.has(n) ? known.get(n)!.physicalId : UNKNOWN),
    getAttr: (n, a) => (known.has(n) ? (known.get(n)!.attributes[a] ?? null) : UNKNOWN),
    getAttrs: (n) => (known.has(n) ? known.get(n)!.attributes : UNKNOWN),
  }
}

/** Two unevaluated expressions are the same (a Deferred by its function and arguments). */
function sameExpression(a: unknown, b: unknown): boolean {
  if (a instanceof Deferred || b instanceof Deferred) return a instanceof Deferred && b instanceof Deferred && a.fn === b.fn && sameExpression(a.args, b.args)
  if (Array.isArray(a) || Array.isArray(b)) return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => sameExpression(x, b[i]))
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    const ka = Object.keys(a)
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && sameExpression((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
  }
  return compareValues(a, b) === 'same'
}

const valuesOf = (r: PreviewRow): Values => ({ physicalId: r.physicalId, attributes: r.attributes ?? {} })
const stateOf = (r: PreviewRow, props: Record<string, unknown>): ResourceState => ({ physicalId: r.physicalId, properties: props, attributes: r.attributes ?? {}, data: r.data ?? {} })
const rowState = (r: PreviewRow): RowState => ({ action: r.action, status: r.status, type: r.type, properties: r.properties, currentTemplateId: r.currentTemplateId, deletionPolicy: r.deletionPolicy })
const ACTION: Record<UpdateDecision['kind'], PreviewAction> = { create: 'create', noop: 'unchanged', update: 'update', replace: 'replace' }

function conditionReason(condition: unknown, on: boolean): string {
  const which = typeof condition === 'string' ? `condition ${condition}` : 'its condition'
  return on ? `${which} is now true` : `${which} is false`
}

export function computePreview(input: PreviewInput, rulesOf: TypeRulesOf, budget: Budget): PreviewResult {
  const { stack, next, target, rows, secrets } = input
  const inFlight = stack.status === 'IN_PROGRESS' && target !== null
  const rowById = new Map(rows.map((r) => [r.id, r]))
  const existing: ExistingRow[] = rows.map((r) => ({ id: r.id, name: r.name, action: r.action, status: r.status, currentTemplateId: r.currentTemplateId, requires: r.requires, replaces: r.replaces, replacedBy: r.replacedBy, updatedAt: r.updatedAt }))
  const names = [...new Set([...Object.keys(next.resources), ...Object.keys(target?.resources ?? {}), ...rows.map((r) => r.name)])]
  // The engine's binding: the row each name of the new template will be updated through.
  const bound = new Map([...chooseRows(names, existing, stack.rawTemplateId, NEW_TEMPLATE).bound].map(([n, id]) => [n, rowById.get(id)!]))

  const validate = (type: string, raw: Record<string, unknown>) => {
    const rules = rulesOf(type)
    if (!rules) return { value: raw, issues: [] }
    return validateProperties(rules.properties, raw, { skip: containsUnknown, acceptUnknown: rules.acceptsAnyProperties === true })
  }

  // ---- before: each name's row, or what a running update will make of it ----
  const baseline = new Map<string, Baseline>()
  const known = new Map<string, Values>()
  for (const [name, r] of bound) {
    baseline.set(name, { row: rowState(r), props: r.properties ?? {}, state: stateOf(r, r.properties ?? {}), kind: 'actual' })
    known.set(name, valuesOf(r))
  }
  if (inFlight) {
    for (const name of topoNames(target.resources)) {
      const r = bound.get(name)
      const def = target.resources[name]!
      if (!r || r.status === 'FAILED' || r.action === 'DELETE') continue
      const converged = r.currentTemplateId === stack.rawTemplateId && r.status === 'COMPLETE' && r.action !== 'INIT'
      if (converged) continue
      let props: Record<string, unknown>
      try {
        props = validate(def.type, resolveProperties(target, name, contextOf(known), budget)).value
      } catch (err) {
        if (err instanceof BudgetExceeded) throw err
        known.delete(name)
        continue
      }
      const rules = rulesOf(def.type) ?? { properties: {} }
      const cmp = compareProperties(r.properties ?? {}, props)
      const changed = Object.keys(cmp).filter((k) => cmp[k] !== 'same')
      const d = decideNode(rowState(r), def.type, rules, props, stateOf(r, r.properties ?? {}), changed)
      if (d.kind !== 'noop') known.delete(name)
      const action: ResourceAction = r.action === 'INIT' ? 'CREATE' : d.kind === 'noop' ? r.action : 'UPDATE'
      const row: RowState = { action, status: 'COMPLETE', type: def.type, properties: props, currentTemplateId: stack.rawTemplateId, deletionPolicy: def.deletionPolicy }
      baseline.set(name, { row, props, state: stateOf(r, props), kind: 'pending' })
    }
  }
  const before = contextOf(known)

  // ---- the new template, in dependency order ----
  /** Whether the update changes a name's values: 'none' leaves them as they are. */
  const changes = new Map<string, 'none' | 'maybe' | 'yes'>()
  const after = new Map<string, Values>()
  const ctx = contextOf(after)
  const items: PreviewItem[] = []
  for (const name of topoNames(next.resources)) {
    const def = next.resources[name]!
    const rules = rulesOf(def.type) ?? { properties: {} }
    const schema = rules.properties
    const base = baseline.get(name)
    let props: Record<string, unknown> = {}
    let problem: string | undefined
    try {
      const checked = validate(def.type, resolveProperties(next, name, ctx, budget))
      props = checked.value
      if (checked.issues.length) problem = `Property error: ${checked.issues.map((i) => `resources.${name}.properties.${i.path}: ${i.message}`).join('; ')}`
    } catch (err) {
      if (err instanceof BudgetExceeded) throw err
      problem = (err as Error).message
    }
    const item: PreviewItem = { name, type: def.type, action: 'create', certain: true }
    if (problem) item.reason = `its node will fail: ${problem}`
    if (!base) {
      if (target?.disabled && Object.hasOwn(target.disabled, name)) item.reason ??= conditionReason(target.disabled[name], true)
      diffInto(item, undefined, props, schema, {}, [])
      changes.set(name, 'yes')
    } else {
      const cmp = compareProperties(base.props, props)
      const targetDef = target?.resources[name]
      // Same expression over inputs this update leaves alone: the same value, known or not.
      if (base.kind === 'pending' && targetDef?.type === def.type && def.dependsOn.every((d) => changes.get(d) === 'none')) {
        for (const k of Object.keys(cmp)) if (cmp[k] === 'unknown' && sameExpression(targetDef.properties[k], def.properties[k])) cmp[k] = 'same'
      }
      const certain = Object.keys(cmp).filter((k) => cmp[k] === 'differs')
      const maybe = Object.keys(cmp).filter((k) => cmp[k] === 'unknown')
      const lower = decideNode(base.row, def.type, rules, props, base.state, certain)
      const upper = maybe.length ? decideNode(base.row, def.type, rules, props, base.state, [...certain, ...maybe].sort()) : lower
      item.action = ACTION[upper.kind]
      item.certain = lower.kind === upper.kind
      if (upper.kind === 'replace') item.reason ??= lower.kind === 'replace' ? lower.reason : upper.reason
      else if (!item.certain) item.reason ??= `depends on values known after apply: ${maybe.join(', ')}`
      if (base.row.type !== def.type) item.fromType = base.row.type
      if (base.kind === 'pending') item.pending = true
      const changed = [...certain, ...maybe].sort()
      if (upper.kind !== 'noop' && changed.length) {
        item.changed = changed
        diffInto(item, base.props, props, schema, rulesOf(base.row.type)?.properties ?? {}, changed)
      }
      changes.set(name, upper.kind === 'noop' ? 'none' : lower.kind === 'noop' ? 'maybe' : 'yes')
    }
    if (problem) changes.set(name, 'yes')
    if (changes.get(name) === 'none' && known.has(name)) after.set(name, known.get(name)!)
    items.push(item)
  }

  // ---- rows the new template does not bind: deleted (or older versions of a name it keeps) ----
  const unbound = new Map<string, PreviewRow[]>()
  for (const r of rows) {
    if (next.resources[r.name] && bound.get(r.name) === r) continue
    if (decideCleanup(rowState(r), NEW_TEMPLATE).kind === 'noop') continue
    ;(unbound.get(r.name) ?? unbound.set(r.name, []).get(r.name)!).push(r)
  }
  for (const [name, list] of [...unbound].sort(([a], [b]) => a.localeCompare(b))) {
    const kept = items.find((i) => i.name === name)
    if (kept) {
      kept.olderRows = list.length
      continue
    }
    const r = bound.get(name) ?? list[list.length - 1]!
    const cleanup = decideCleanup(rowState(r), NEW_TEMPLATE)
    const item: PreviewItem = { name, type: r.type, action: 'delete', certain: true }
    if (Object.hasOwn(next.disabled, name)) item.reason = conditionReason(next.disabled[name], false)
    if (cleanup.kind === 'retain') item.reason = `${item.reason ? `${item.reason}; ` : ''}deletion_policy Retain: the resource is kept outside the stack`
    if (cleanup.kind === 'forget') item.reason = `${item.reason ? `${item.reason}; ` : ''}never created: it is dropped`
    if (list.length > 1) item.olderRows = list.length - 1
    diffInto(item, r.properties ?? {}, undefined, {}, rulesOf(r.type)?.properties ?? {}, [])
    items.push(item)
  }

  const result: PreviewResult = {
    stack: { id: stack.id, name: stack.name },
    against: { templateId: stack.rawTemplateId, traversalId: stack.currentTraversalId, inFlight },
    items,
    outputs: outputChanges(target, next, before, ctx, budget),
    conditions: conditionChanges(target, next),
    summary: { create: 0, update: 0, replace: 0, delete: 0, unchanged: 0, uncertain: 0 },
  }
  for (const i of items) {
    result.summary[i.action]++
    if (!i.certain) result.summary.uncertain++
  }
  return redact(result, secrets)
}

/**
 * The item's property diff: every leaf of the properties that change (or may),
 * secret properties masked, properties the type cannot update in place marked.
 */
function diffInto(item: PreviewItem, before: Record<string, unknown> | undefined, after: Record<string, unknown> | undefined, schema: Record<string, PropertySchema>, oldSchema: Record<string, PropertySchema>, keys: string[]) {
  const all = keys.length ? keys : [...new Set([...Object.keys(before ?? {}), ...Object.keys(after ?? {})])].sort()
  const out: PropertyChange[] = []
  let more = 0
  for (const k of all) {
    const a = before ? (before[k] ?? undefined) : undefined
    const b = after ? (after[k] ?? undefined) : undefined
    if (a === undefined && b === undefined) continue
    const { changes, more: cut } = valueChanges(a, b, k, MAX_CHANGES - out.length)
    more += cut
    const secret = schema[k]?.secret === true || oldSchema[k]?.secret === true
    const forces = item.action === 'replace' && k in schema && !schema[k]!.updateAllowed
    for (const c of changes) out.push({ ...(secret ? maskChange(c) : c), ...(forces ? { forcesReplacement: true as const } : {}) })
  }
  if (out.length) item.changes = out
  if (more) item.moreChanges = more
}

function maskChange(c: ValueChange): ValueChange {
  return { ...c, ...('before' in c ? { before: MASK } : {}), ...('after' in c ? { after: MASK } : {}) }
}

function outputChanges(target: PreviewDefinition | null, next: PreviewDefinition, before: ResolveContext, after: ResolveContext, budget: Budget): OutputChange[] {
  const was = target ? resolveOutputs(target, before, budget) : {}
  const will = resolveOutputs(next, after, budget)
  const out: OutputChange[] = []
  for (const name of [...new Set([...Object.keys(was), ...Object.keys(will)])].sort()) {
    const a = was[name]
    const b = will[name]
    if (!b) {
      out.push({ name, action: 'delete', certain: true, changes: valueChanges(a!.value, undefined).changes })
      continue
    }
    const error = b.error ? { error: b.error } : {}
    if (!a) {
      out.push({ name, action: 'create', certain: true, changes: valueChanges(undefined, b.value).changes, ...error })
      continue
    }
    const cmp: Comparison = compareValues(a.value, b.value)
    if (cmp === 'same') out.push({ name, action: 'unchanged', certain: true, ...error })
    else out.push({ name, action: 'update', certain: cmp === 'differs', changes: valueChanges(a.value, b.value).changes, ...error })
  }
  return out
}

function conditionChanges(target: PreviewDefinition | null, next: PreviewDefinition): ConditionChange[] {
  const was = target?.conditions ?? {}
  const names = [...new Set([...Object.keys(was), ...Object.keys(next.conditions)])].sort()
  return names.map((name) => ({ name, before: Object.hasOwn(was, name) ? was[name]! : null, after: Object.hasOwn(next.conditions, name) ? next.conditions[name]! : null }))
}
