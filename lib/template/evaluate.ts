/**
 * Evaluating intrinsic functions, in two phases:
 *
 * - static (when the stack definition is built): get_param, conditions, `if`
 *   and every function whose arguments are known are computed; a function that
 *   needs a resource's value (get_resource, get_attr, or anything over them)
 *   becomes a `Deferred` node, and the resources it names are recorded as
 *   dependencies;
 * - runtime (when a node runs, or for a preview): Deferred nodes are computed
 *   with the values of other resources (ResolveContext). An UNKNOWN value
 *   (preview) makes every function over it UNKNOWN.
 *
 * A map with a single key that names a function is a function call; the
 * functions available depend on heat_template_version.
 *
 * Both phases run against a Budget (budget.ts): every node visited is an
 * operation, and every value a reference brings in is output, each time.
 * Whether an evaluated list or map holds a Deferred or an UNKNOWN is recorded
 * as it is built (Marks), so a function never walks its arguments again to
 * find out: nested functions cost their size, not their size times their depth.
 *
 * Both phases also carry a Secrecy (secrecy.ts): reading a hidden parameter or
 * a secret attribute counts as a secret read, and a function whose arguments
 * read one makes a secret result. A Deferred remembers whether its arguments
 * read one in the static phase, so the runtime phase knows it too.
 */
import { Budget, BudgetExceeded, DEFAULT_EVALUATION_LIMITS } from './budget'
import { DATA_FUNCTIONS, deepEqual, FunctionError } from './functions-data'
import type { IssueList } from './issues'
import { formatPath, type PathPart } from './positions'
import { holdsSecret, redactText, secretList, Secrecy } from './secrecy'
import { UNKNOWN, type ResolveContext } from './types'
import { available, FUNCTION_SINCE, UNSUPPORTED_FUNCTIONS } from './versions'

/** A function call that can only be computed once other resources exist. */
export class Deferred {
  constructor(
    readonly fn: string,
    readonly args: unknown,
    readonly path: ReadonlyArray<PathPart>,
    /** Its arguments were evaluated (in the static phase) from a secret: its result is secret. */
    readonly secret = false,
  ) {}
}

const isMap = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Deferred)
const CONDITION_FNS = ['equals', 'not', 'and', 'or', 'contains']

/** Lists and maps built by an evaluation that hold a Deferred or an UNKNOWN somewhere inside. */
export class Marks {
  private readonly deferred = new WeakSet<object>()
  private readonly unknown = new WeakSet<object>()

  hasDeferred(v: unknown): boolean {
    return v instanceof Deferred || (typeof v === 'object' && v !== null && this.deferred.has(v))
  }

  hasUnknown(v: unknown): boolean {
    return v === UNKNOWN || (typeof v === 'object' && v !== null && this.unknown.has(v))
  }

  /** Record on a new list or map what its (already evaluated) children hold. */
  collect<T extends object>(out: T, children: Iterable<unknown>): T {
    for (const c of children) {
      if (this.hasDeferred(c)) this.deferred.add(out)
      if (this.hasUnknown(c)) this.unknown.add(out)
    }
    return out
  }
}

export interface StaticScope {
  version: string
  params: Record<string, unknown>
  /** the value of a named condition (evaluated lazily, cycles reported) */
  condition(name: string, path: ReadonlyArray<PathPart>): boolean
  hasCondition(name: string): boolean
  /** every resource name the template defines, and those whose condition holds */
  defined: Set<string>
  enabled: Set<string>
  /** attributes a resource's type declares (undefined: unknown, accept any) */
  attributesOf(resource: string): string[] | undefined
  issues: IssueList
  /** where get_resource / get_attr references are collected */
  refs?: Set<string>
  budget: Budget
  marks: Marks
  /** Names of hidden parameters: get_param of one reads a secret. */
  hidden: ReadonlySet<string>
  secrecy: Secrecy
}

/** The function name of a node, if it is a function call. */
export function functionName(node: unknown): string | null {
  if (!isMap(node)) return null
  const keys = Object.keys(node)
  if (keys.length !== 1) return null
  const k = keys[0]!
  if (k in FUNCTION_SINCE || k in UNSUPPORTED_FUNCTIONS || k.startsWith('Fn::') || k === 'Ref') return k
  return null
}

/** Whether a value holds a Deferred anywhere (a walk; evaluations use Marks instead). */
export function containsDeferred(v: unknown, budget?: Budget): boolean {
  budget?.op()
  if (v instanceof Deferred) return true
  if (Array.isArray(v)) return v.some((x) => containsDeferred(x, budget))
  if (isMap(v)) return Object.values(v).some((x) => containsDeferred(x, budget))
  return false
}

/** Walk a value along `path` (keys and indices), for get_param and get_attr. */
export function dig(value: unknown, path: ReadonlyArray<unknown>, what: string): unknown {
  let cur = value
  for (const key of path) {
    if (cur === UNKNOWN) return UNKNOWN
    if (Array.isArray(cur)) {
      const i = Number(key)
      if (!Number.isInteger(i) || i < 0 || i >= cur.length) throw new FunctionError(`${what}: index ${JSON.stringify(key)} is out of range`)
      cur = cur[i]
    } else if (isMap(cur)) {
      // Own keys only: `constructor` or `__proto__` must not reach the object's prototype.
      if (!Object.hasOwn(cur, String(key))) throw new FunctionError(`${what}: key ${JSON.stringify(key)} not found`)
      cur = cur[String(key)]
    } else throw new FunctionError(`${what}: cannot look up ${JSON.stringify(key)} in a ${cur === null ? 'null' : typeof cur}`)
  }
  return cur
}

export function evaluateStatic(node: unknown, s: StaticScope, path: PathPart[]): unknown {
  s.budget.op()
  if (Array.isArray(node)) {
    const out = node.map((x, i) => evaluateStatic(x, s, [...path, i]))
    return s.marks.collect(out, out)
  }
  if (!isMap(node)) return node
  const fn = functionName(node)
  if (!fn) {
    const out = Object.fromEntries(Object.entries(node).map(([k, v]) => [k, evaluateStatic(v, s, [...path, k])]))
    return s.marks.collect(out, Object.values(out))
  }
  const args = node[fn]
  const fpath = [...path, fn]
  if (fn in UNSUPPORTED_FUNCTIONS) return report(s, fpath, UNSUPPORTED_FUNCTIONS[fn]!)
  if (fn.startsWith('Fn::') || fn === 'Ref') return report(s, fpath, `${fn} (a CloudFormation function) is not supported; use the HOT equivalent (get_resource, get_attr, list_join, …)`)
  if (!available(fn, s.version)) return report(s, fpath, `${fn} is not available in heat_template_version ${s.version}; it needs ${FUNCTION_SINCE[fn]} or later`)
  try {
    switch (fn) {
      case 'get_param':
        return getParam(args, s)
      case 'get_resource':
        return getResource(args, s, fpath)
      case 'get_attr':
        return getAttr(args, s, fpath)
      case 'if': {
        if (!Array.isArray(args) || args.length !== 3) throw new FunctionError('if takes [condition, value if true, value if false]')
        return conditionValue(args[0], s, [...fpath, 0]) ? evaluateStatic(args[1], s, [...fpath, 1]) : evaluateStatic(args[2], s, [...fpath, 2])
      }
      default: {
        if (CONDITION_FNS.includes(fn) && fn !== 'contains') return conditionValue(node, s, path)
        const mark = s.secrecy.mark()
        const evaluated = evaluateStatic(args, s, fpath)
        const secret = s.secrecy.since(mark)
        if (s.marks.hasDeferred(evaluated)) return new Deferred(fn, evaluated, fpath, secret)
        if (s.marks.hasUnknown(evaluated)) return UNKNOWN
        const result = applyData(fn, evaluated, s.budget)
        if (secret) s.secrecy.derive(fn, evaluated, result)
        return result
      }
    }
  } catch (err) {
    // A message may quote a value made from a secret (the definition masks hidden values in every issue at the end).
    if (err instanceof FunctionError) return report(s, fpath, redactText(err.message, secretList(s.secrecy.learned)))
    if (err instanceof BudgetExceeded) err.at(formatPath(fpath))
    throw err
  }
}

function report(s: StaticScope, path: PathPart[], message: string): null {
  s.issues.add('function', path, message)
  return null
}

function applyData(fn: string, args: unknown, budget: Budget): unknown {
  const f = DATA_FUNCTIONS[fn]
  if (!f) throw new FunctionError(`unknown function ${fn}`)
  return f(args, budget)
}

function getParam(args: unknown, s: StaticScope): unknown {
  const list = Array.isArray(args) ? args : [args]
  const [name, ...rest] = list
  if (typeof name !== 'string') throw new FunctionError('get_param takes a parameter name, or [name, key or index, ...]')
  if (!Object.hasOwn(s.params, name)) throw new FunctionError(`The Parameter (${name}) was not defined in the template`)
  const value = dig(s.params[name], rest, `get_param ${name}`)
  // The value is shared, not copied, but it is stored and sent once per use.
  s.budget.produced(value)
  if (s.hidden.has(name)) s.secrecy.read(value)
  return value
}

function getResource(args: unknown, s: StaticScope, path: PathPart[]): unknown {
  if (typeof args !== 'string') throw new FunctionError('get_resource takes a resource name')
  if (!s.defined.has(args)) {
    s.issues.add('reference', path, `The specified reference "${args}" (in get_resource) is incorrect: no such resource`)
    return null
  }
  if (!s.enabled.has(args)) return null // its condition is false
  s.refs?.add(args)
  return new Deferred('get_resource', args, path)
}

function getAttr(args: unknown, s: StaticScope, path: PathPart[]): unknown {
  const mark = s.secrecy.mark()
  const evaluated = evaluateStatic(args, s, path)
  if (!Array.isArray(evaluated) || evaluated.length < 2 || typeof evaluated[0] !== 'string' || typeof evaluated[1] !== 'string') {
    throw new FunctionError('get_attr takes [resource name, attribute name, optional key or index, ...]')
  }
  const [name, attr] = evaluated as [string, string]
  if (!s.defined.has(name)) {
    s.issues.add('reference', path, `The specified reference "${name}" (in get_attr) is incorrect: no such resource`)
    return null
  }
  if (!s.enabled.has(name)) return null
  const known = s.attributesOf(name)
  if (known && !known.includes(attr)) {
    s.issues.add('reference', [...path, 1], `resource ${name} has no attribute "${attr}" (it has ${known.length ? known.join(', ') : 'none'})`)
    return null
  }
  s.refs?.add(name)
  return new Deferred('get_attr', evaluated, path, s.secrecy.since(mark))
}

/**
 * A condition: a boolean, a condition name, or equals / not / and / or / contains. Its outcome is
 * a boolean, never masked: the parameters it reads do not make the value it selects secret.
 */
export function conditionValue(expr: unknown, s: StaticScope, path: PathPart[]): boolean {
  return s.secrecy.untracked(() => condition(expr, s, path))
}

function condition(expr: unknown, s: StaticScope, path: PathPart[]): boolean {
  s.budget.op()
  if (typeof expr === 'boolean') return expr
  if (typeof expr === 'string') {
    if (!s.hasCondition(expr)) {
      s.issues.add('reference', path, `Invalid condition "${expr}": no such condition`)
      return false
    }
    return s.condition(expr, path)
  }
  const fn = functionName(expr)
  if (!fn || !['equals', 'not', 'and', 'or', 'contains'].includes(fn)) {
    s.issues.add('function', path, 'a condition must be true, false, a condition name, or one of equals, not, and, or, contains')
    return false
  }
  if (!available(fn, s.version)) {
    s.issues.add('function', [...path, fn], `${fn} is not available in heat_template_version ${s.version}`)
    return false
  }
  const args = (expr as Record<string, unknown>)[fn]
  const fpath = [...path, fn]
  switch (fn) {
    case 'equals': {
      if (!Array.isArray(args) || args.length !== 2) return report(s, fpath, 'equals takes [value, value]') ?? false
      const a = evaluateStatic(args[0], s, [...fpath, 0])
      const b = evaluateStatic(args[1], s, [...fpath, 1])
      if (s.marks.hasDeferred(a) || s.marks.hasDeferred(b)) return report(s, fpath, 'equals in a condition cannot use resource values') ?? false
      return deepEqual(a, b, s.budget)
    }
    case 'not':
      return !conditionValue(args, s, fpath)
    case 'and':
    case 'or': {
      if (!Array.isArray(args) || args.length < 2) return report(s, fpath, `${fn} takes a list of at least two conditions`) ?? false
      const values = args.map((a, i) => conditionValue(a, s, [...fpath, i]))
      return fn === 'and' ? values.every(Boolean) : values.some(Boolean)
    }
    default: {
      const evaluated = evaluateStatic(args, s, fpath)
      try {
        return DATA_FUNCTIONS.contains!(evaluated, s.budget) as boolean
      } catch (err) {
        if (err instanceof BudgetExceeded) throw err.at(formatPath(fpath))
        return report(s, fpath, (err as Error).message) ?? false
      }
    }
  }
}

/** What runtime evaluation carries: the budget, which built values hold an UNKNOWN, and what is secret. */
export interface Runtime {
  budget: Budget
  marks: Marks
  secrecy: Secrecy
}

export function runtime(budget = new Budget(DEFAULT_EVALUATION_LIMITS), secrecy = new Secrecy(budget)): Runtime {
  return { budget, marks: new Marks(), secrecy }
}

/** Runtime: compute every Deferred in a value with the values of other resources. */
export function resolveDeferred(v: unknown, ctx: ResolveContext, rt: Runtime = runtime()): unknown {
  rt.budget.op()
  if (v instanceof Deferred) return runDeferred(v, ctx, rt)
  if (Array.isArray(v)) {
    const out = v.map((x) => resolveDeferred(x, ctx, rt))
    return rt.marks.collect(out, out)
  }
  if (isMap(v)) {
    const out = Object.fromEntries(Object.entries(v).map(([k, x]) => [k, resolveDeferred(x, ctx, rt)]))
    return rt.marks.collect(out, Object.values(out))
  }
  return v
}

function runDeferred(d: Deferred, ctx: ResolveContext, rt: Runtime): unknown {
  try {
    if (d.secret) rt.secrecy.touch()
    if (d.fn === 'get_resource') {
      const id = ctx.getResource(d.args as string)
      rt.budget.produced(id)
      return id
    }
    if (d.fn === 'get_attr') {
      const [name, attr, ...rest] = d.args as [string, string, ...unknown[]]
      const value = ctx.getAttr(name, attr)
      if (value === UNKNOWN) return UNKNOWN
      let found: unknown
      try {
        found = dig(value, rest, `get_attr ${name}.${attr}`)
      } catch {
        return null // a path into an attribute that is not there yet: Heat answers None
      }
      rt.budget.produced(found)
      // Secret: an attribute its type declares secret, or one that holds a secret its resource was
      // made from (a resource may pass a property on as an attribute, as OS::Heat::Value does).
      if (d.secret || ctx.secretAttribute?.(name, attr) || holdsSecret(found, ctx.secretFormsOf?.(name) ?? [], rt.budget)) rt.secrecy.read(found)
      return found
    }
    const mark = rt.secrecy.mark()
    const args = resolveDeferred(d.args, ctx, rt)
    if (rt.marks.hasUnknown(args)) return UNKNOWN
    try {
      const result = applyData(d.fn, args, rt.budget)
      if (d.secret || rt.secrecy.since(mark)) rt.secrecy.derive(d.fn, args, result)
      return result
    } catch (err) {
      if (err instanceof BudgetExceeded) throw err
      throw new FunctionError(`${d.path.join('.')}: ${redactText((err as Error).message, secretList(rt.secrecy.learned))}`)
    }
  } catch (err) {
    if (err instanceof BudgetExceeded) err.at(formatPath(d.path))
    throw err
  }
}
