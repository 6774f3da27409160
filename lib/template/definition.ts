/**
 * buildDefinition: a parsed template plus parameter values -> the stack's
 * definition. Parameters are converted and constrained, conditions evaluated
 * (lazily, so a condition may refer to another, and a loop is reported),
 * disabled resources dropped, static functions computed, resource types and
 * literal properties checked against the type catalog, and the dependency
 * graph checked for cycles (all of them, not only the first). Every problem is
 * collected; one TemplateError carries them all.
 *
 * The resource count is checked first, before anything is evaluated; the
 * evaluation itself runs against opts.budget (budget.ts), and a spent budget
 * stops it with BudgetExceeded rather than an issue.
 *
 * Secrecy (secrecy.ts): the definition carries every form of the hidden
 * parameters' values, each resource the forms its properties' static
 * evaluation derived from them, and each output whether it read one; no issue
 * message quotes any of them.
 */
import { Budget, BudgetExceeded, DEFAULT_EVALUATION_LIMITS } from './budget'
import { findCycles } from './cycles'
import { aliasType, EMPTY_ENVIRONMENT } from './environment'
import { conditionValue, Deferred, evaluateStatic, Marks, type StaticScope } from './evaluate'
import { DELETION_POLICIES } from './parse'
import { IssueList } from './issues'
import { resolveParameterValues } from './parameters'
import { formatPath, type PathPart } from './positions'
import { addForms, redactText, secretList, Secrecy } from './secrecy'
import { TemplateError, UNKNOWN, type BuildOptions, type OutputSnippet, type ParsedTemplate, type ResourceDefinition, type StackDefinition } from './types'

export function buildDefinition(t: ParsedTemplate, opts: BuildOptions = {}): StackDefinition {
  const issues = new IssueList({ find: (p) => t.positionOf(p) })
  const budget = opts.budget ?? new Budget(DEFAULT_EVALUATION_LIMITS)
  const defined = Object.keys(t.resources).length
  if (opts.maxResources !== undefined && defined > opts.maxResources) {
    throw new TemplateError([{ code: 'limit', path: 'resources', line: null, column: null, message: `the template has ${defined} resources; the limit is ${opts.maxResources}`, limit: { name: 'resources_per_stack', max: opts.maxResources } }])
  }
  const env = opts.environment ?? EMPTY_ENVIRONMENT
  const pseudo = { stackName: opts.stackName, stackId: opts.stackId, projectId: opts.projectId, allowMissing: opts.allowMissingParameters === true, validated: opts.validated === true }
  const params = resolveParameterValues(t, env, opts.parameters ?? {}, pseudo, issues, budget)

  const hidden = Object.values(t.parameters).filter((p) => p.hidden)
  const hiddenForms = new Set<string>()
  for (const p of hidden) {
    const v = params[p.name]
    addForms(v, p.type === 'comma_delimited_list', hiddenForms, budget)
    if (Array.isArray(v)) addForms(v.join(','), false, hiddenForms, budget) // a list parameter's text
  }
  const derived = new Set<string>()
  const secrecy = () => new Secrecy(budget, hiddenForms)

  const typeOf = (name: string) => aliasType(env, t.resources[name]!.type)
  const conditionCache = new Map<string, boolean>()
  const evaluating: string[] = []
  const scope: StaticScope = {
    version: t.version,
    params,
    hasCondition: (name) => Object.hasOwn(t.conditions, name),
    condition(name) {
      const cached = conditionCache.get(name)
      if (cached !== undefined) return cached
      // A chain of conditions naming each other recurses once per link: as deep as nesting allows, no deeper.
      if (evaluating.length >= budget.limits.maxDepth) throw new BudgetExceeded('depth', budget.limits.maxDepth).at(`conditions.${name}`)
      if (evaluating.includes(name)) {
        const loop = [...evaluating.slice(evaluating.indexOf(name)), name]
        issues.add('cycle', ['conditions', name], `conditions refer to each other in a loop: ${loop.join(' -> ')}`)
        conditionCache.set(name, false)
        return false
      }
      evaluating.push(name)
      const value = conditionValue(t.conditions[name], scope, ['conditions', name])
      evaluating.pop()
      conditionCache.set(name, value)
      return value
    },
    defined: new Set(Object.keys(t.resources)),
    enabled: new Set<string>(),
    attributesOf: (name) => (opts.types && t.resources[name] ? opts.types.attributes(typeOf(name)) : undefined),
    issues,
    budget,
    marks: new Marks(),
    hidden: new Set(hidden.map((p) => p.name)),
    secrecy: secrecy(),
  }
  // Every condition is evaluated, used or not, so a broken one is reported.
  for (const name of Object.keys(t.conditions)) scope.condition(name, ['conditions', name])
  for (const [name, r] of Object.entries(t.resources)) {
    if (r.condition === undefined || conditionValue(r.condition, scope, ['resources', name, 'condition'])) scope.enabled.add(name)
  }

  const resources: Record<string, ResourceDefinition> = {}
  for (const name of opts.outputsOnly ? [] : [...scope.enabled].sort()) {
    const r = t.resources[name]!
    const base: PathPart[] = ['resources', name]
    const type = typeOf(name)
    const refs = new Set<string>()
    const local: StaticScope = { ...scope, refs, secrecy: secrecy() }
    const properties = atPath(base, () => evaluateStatic(r.properties, local, [...base, 'properties'])) as Record<string, unknown>
    const metadata = atPath(base, () => evaluateStatic(r.metadata, local, [...base, 'metadata'])) as Record<string, unknown>
    r.dependsOn.forEach((dep, i) => {
      const at = typeof t.json.resources === 'object' && Array.isArray((t.json.resources as Record<string, { depends_on?: unknown }>)[name]?.depends_on) ? [...base, 'depends_on', i] : [...base, 'depends_on']
      if (!scope.defined.has(dep)) issues.add('reference', at, `depends_on refers to "${dep}", which is not a resource of this template`)
      else if (scope.enabled.has(dep)) refs.add(dep) // a dependency on a disabled resource is dropped, as Heat does
    })
    const deletionPolicy = keyValue(r.deletionPolicy, 'deletion_policy', base, scope, (v) => (typeof v === 'string' ? DELETION_POLICIES[v] : undefined), 'one of Delete, Retain, Snapshot') ?? 'Delete'
    const externalId = r.externalId === undefined ? undefined : keyValue(r.externalId, 'external_id', base, scope, (v) => (typeof v === 'string' && v ? v : undefined), 'a non-empty string')
    if (r.type && opts.types) {
      if (!opts.types.has(type)) {
        issues.add('type', [...base, 'type'], `unknown resource type "${r.type}"${type !== r.type ? ` (aliased to "${type}")` : ''}`)
      } else {
        for (const p of opts.types.validateProperties(type, withUnknowns(properties, budget) as Record<string, unknown>)) {
          issues.add('property', [...base, 'properties', ...splitPath(p.path)], p.message)
        }
        if (r.externalId !== undefined && opts.types.adopts && !opts.types.adopts(type)) {
          issues.add('structure', [...base, 'external_id'], `${type} cannot adopt an existing object: it has nothing outside Kiln to adopt (external_id)`)
        }
        if (deletionPolicy === 'Snapshot' && opts.types.snapshots && !opts.types.snapshots(type)) {
          issues.add('structure', [...base, 'deletion_policy'], `${type} cannot take a snapshot: deletion_policy Snapshot is refused for it (use Delete or Retain)`)
        }
      }
      // No built-in type has an update policy (Heat's are for groups and servers): one given would be ignored.
      if (r.updatePolicy && Object.keys(r.updatePolicy).length) {
        issues.add('structure', [...base, 'update_policy'], `${type} has no update policy: Kiln would ignore ${Object.keys(r.updatePolicy).join(', ')}`)
      }
    }
    resources[name] = {
      name,
      type,
      properties,
      dependsOn: [...refs].sort(),
      deletionPolicy,
      // Metadata that needs resource values is kept as written (Kiln does not expose it at runtime).
      metadata: local.marks.hasDeferred(metadata) ? r.metadata : metadata,
      ...(local.secrecy.learned.size ? { secretForms: [...local.secrecy.learned] } : {}),
      ...(externalId !== undefined ? { externalId } : {}),
      ...(r.description !== undefined ? { description: r.description } : {}),
    }
    for (const f of local.secrecy.learned) derived.add(f)
  }

  const names = Object.keys(resources)
  const { cycles, truncated } = findCycles(names, new Map(names.map((n) => [n, resources[n]!.dependsOn])), 100, budget)
  if (cycles.length) {
    const text = cycles.map((c) => [...c, c[0]].join(' -> ')).join('; ')
    issues.add('cycle', ['resources', cycles[0]![0]!], `Circular Dependency Found: ${cycles.length}${truncated ? '+' : ''} cycle(s): ${text}`, { cycles })
  }

  const outputs: Record<string, OutputSnippet> = {}
  for (const [name, o] of Object.entries(t.outputs)) {
    const base: PathPart[] = ['outputs', name]
    const on = o.condition === undefined || conditionValue(o.condition, scope, [...base, 'condition'])
    const local: StaticScope = { ...scope, secrecy: secrecy() }
    const value = on ? atPath(base, () => evaluateStatic(o.value, local, [...base, 'value'])) : null
    outputs[name] = {
      ...(o.description !== undefined ? { description: o.description } : {}),
      value,
      ...(local.secrecy.since(0) ? { sensitive: true } : {}),
    }
    for (const f of local.secrecy.learned) derived.add(f)
  }

  const secretForms = [...secretList(hiddenForms).texts]
  if (!issues.empty && (secretForms.length || derived.size)) {
    // A message may quote a value (`expected a number, got …`): never a secret or one made from it.
    const all = secretList([...secretForms, ...derived])
    for (const i of issues.items) i.message = redactText(i.message, all)
  }
  issues.throwIfAny()
  return {
    template: t,
    parameters: params,
    hiddenParameters: hidden.map((p) => p.name),
    secretForms,
    resources,
    outputs,
    conditions: Object.fromEntries(Object.keys(t.conditions).map((name) => [name, conditionCache.get(name) === true])),
    disabled: Object.fromEntries(Object.keys(t.resources).filter((name) => !scope.enabled.has(name)).map((name) => [name, t.resources[name]!.condition])),
    ...(opts.environment?.hooks?.length ? { hooks: opts.environment.hooks } : {}),
  }
}

/**
 * A resource key that may be a function (deletion_policy, external_id: Heat
 * resolves them when it builds the definition): evaluated now, and it must
 * then be known (it cannot depend on another resource) and valid.
 */
function keyValue<T>(raw: unknown, key: string, base: PathPart[], scope: StaticScope, valid: (v: unknown) => T | undefined, what: string): T | undefined {
  if (raw === undefined) return undefined
  const path = [...base, key]
  const v = atPath(path, () => evaluateStatic(raw, { ...scope, refs: new Set() }, path))
  if (scope.marks.hasDeferred(v) || scope.marks.hasUnknown(v) || v === UNKNOWN) {
    if (v !== UNKNOWN && !scope.marks.hasUnknown(v)) scope.issues.add('function', path, `${key} must be known when the template is checked: it cannot depend on another resource`)
    return undefined
  }
  const ok = valid(v)
  if (ok === undefined) scope.issues.add('structure', path, `${key} must be ${what} (got ${JSON.stringify(v)})`)
  return ok
}

/** A spent budget names at least the resource or output it was spent in. */
function atPath<T>(path: PathPart[], fn: () => T): T {
  try {
    return fn()
  } catch (err) {
    if (err instanceof BudgetExceeded) err.at(formatPath(path))
    throw err
  }
}

/** Deferred values become UNKNOWN so type validation skips what it cannot know yet. */
function withUnknowns(v: unknown, budget: Budget): unknown {
  budget.op()
  if (v instanceof Deferred) return UNKNOWN
  if (Array.isArray(v)) return v.map((x) => withUnknowns(x, budget))
  if (typeof v === 'object' && v !== null) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, withUnknowns(x, budget)]))
  return v
}

/** Whether a value of a definition is known now: it holds no function that waits for another resource (and no UNKNOWN). */
export function isKnown(v: unknown): boolean {
  if (v instanceof Deferred || v === UNKNOWN) return false
  if (Array.isArray(v)) return v.every(isKnown)
  if (typeof v === 'object' && v !== null) return Object.values(v).every(isKnown)
  return true
}

/** `action_wait_secs.create` / `networks[0].port` -> path parts. */
export function splitPath(path: string): PathPart[] {
  const out: PathPart[] = []
  for (const m of path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) out.push(m[2] !== undefined ? Number(m[2]) : m[1]!)
  return out
}
