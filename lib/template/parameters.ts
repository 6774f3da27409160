/**
 * Parameter values: where they come from (request > environment `parameters`
 * > environment `parameter_defaults` > template `default`), their type
 * conversion and their constraints — with Heat's messages. A hidden
 * parameter's value never appears in a message. An `allowed_pattern` is
 * matched by RE2 in linear time (pattern.ts), its cost charged to the budget.
 */
import { BudgetExceeded, deeperThan, type Budget } from './budget'
import type { IssueList } from './issues'
import { formatPath } from './positions'
import { fullMatch, tenantPattern } from './pattern'
import { UNKNOWN, type Environment, type ParameterConstraint, type ParameterSchema, type ParsedTemplate } from './types'

const TRUE = ['true', 't', 'yes', 'y', 'on', '1']
const FALSE = ['false', 'f', 'no', 'n', 'off', '0']

type Converted = { ok: true; value: unknown } | { ok: false; message: string }

export function convertParameter(p: ParameterSchema, raw: unknown): Converted {
  const shown = p.hidden ? '******' : JSON.stringify(raw)
  switch (p.type) {
    case 'string':
      if (typeof raw === 'string') return { ok: true, value: raw }
      if (typeof raw === 'number' || typeof raw === 'boolean') return { ok: true, value: String(raw) }
      return { ok: false, message: `Value ${shown} is not a string` }
    case 'number': {
      if (typeof raw === 'number' && Number.isFinite(raw)) return { ok: true, value: raw }
      if (typeof raw === 'string' && raw.trim() !== '' && Number.isFinite(Number(raw))) return { ok: true, value: Number(raw) }
      return { ok: false, message: `Value ${shown} is not a number` }
    }
    case 'boolean': {
      if (typeof raw === 'boolean') return { ok: true, value: raw }
      const s = String(raw).toLowerCase()
      if (TRUE.includes(s)) return { ok: true, value: true }
      if (FALSE.includes(s)) return { ok: true, value: false }
      return { ok: false, message: `Value ${shown} is not a boolean (use true or false)` }
    }
    case 'json': {
      if (typeof raw === 'object' && raw !== null) return { ok: true, value: raw }
      if (typeof raw === 'string') {
        try {
          const v = JSON.parse(raw) as unknown
          if (typeof v === 'object' && v !== null) return { ok: true, value: v }
        } catch {
          /* fall through */
        }
      }
      return { ok: false, message: `Value ${shown} is not a JSON map or list` }
    }
    case 'comma_delimited_list': {
      if (Array.isArray(raw)) return { ok: true, value: raw.map((x) => (typeof x === 'string' ? x : JSON.stringify(x))) }
      if (typeof raw === 'string') return { ok: true, value: raw === '' ? [] : raw.split(',') }
      if (typeof raw === 'number') return { ok: true, value: [String(raw)] }
      return { ok: false, message: `Value ${shown} is not a comma-delimited list` }
    }
  }
}

function sizeOf(v: unknown): number {
  if (typeof v === 'string' || Array.isArray(v)) return v.length
  if (typeof v === 'object' && v !== null) return Object.keys(v).length
  return 0
}

function bounds(b: { min?: number; max?: number }, what: string): string {
  if (b.min !== undefined && b.max !== undefined) return `${what} must be between ${b.min} and ${b.max}`
  if (b.min !== undefined) return `${what} must be at least ${b.min}`
  return `${what} must be no greater than ${b.max}`
}

/** The first constraint the (converted) value breaks, as a message; null if none. */
export function checkConstraints(p: ParameterSchema, value: unknown, budget: Budget): string | null {
  const shown = p.hidden ? '******' : JSON.stringify(value)
  for (const c of p.constraints as ParameterConstraint[]) {
    let broken: string | null = null
    if ('length' in c) {
      const n = sizeOf(value)
      if ((c.length.min !== undefined && n < c.length.min) || (c.length.max !== undefined && n > c.length.max)) broken = `${bounds(c.length, 'length')}`
    } else if ('range' in c) {
      const n = value as number
      if ((c.range.min !== undefined && n < c.range.min) || (c.range.max !== undefined && n > c.range.max)) {
        broken = c.range.min !== undefined && c.range.max !== undefined ? `${shown} must be in the range ${c.range.min} to ${c.range.max}` : bounds(c.range, 'the value')
      }
    } else if ('allowed_values' in c) {
      const allowed = c.allowed_values.map((a) => (p.type === 'number' ? Number(a) : p.type === 'boolean' ? String(a).toLowerCase() : String(a)))
      const items = Array.isArray(value) ? value : [value]
      const norm = (x: unknown) => (p.type === 'number' ? Number(x) : p.type === 'boolean' ? String(x).toLowerCase() : String(x))
      const bad = items.find((x) => !allowed.includes(norm(x) as never))
      if (bad !== undefined) broken = `${p.hidden ? '******' : JSON.stringify(bad)} is not an allowed value ${JSON.stringify(c.allowed_values)}`
    } else if ('allowed_pattern' in c) {
      // Heat: re.match(pattern) must consume the whole value. A pattern RE2 cannot run was reported by patternIssues.
      const compiled = tenantPattern(c.allowed_pattern, budget)
      if (compiled.ok && !fullMatch(compiled.re, String(value), budget)) broken = `${shown} does not match pattern "${c.allowed_pattern}"`
    }
    if (broken) return c.description ?? broken
  }
  return null
}

export interface PseudoParameters {
  stackName?: string
  stackId?: string
  projectId?: string
  /** a parameter without a value is UNKNOWN rather than an error */
  allowMissing?: boolean
  /** values and defaults were checked at submit time: constraints are not checked again */
  validated?: boolean
}

/** Patterns RE2 cannot run (lookaround, backreferences, bad syntax), each at its constraint, naming the parameter. */
function patternIssues(t: ParsedTemplate, issues: IssueList, budget: Budget): Set<string> {
  const broken = new Set<string>()
  for (const [name, p] of Object.entries(t.parameters)) {
    p.constraints.forEach((c, i) => {
      if (!('allowed_pattern' in c)) return
      const at = ['parameters', name, 'constraints', i, 'allowed_pattern']
      let compiled: ReturnType<typeof tenantPattern>
      try {
        compiled = tenantPattern(c.allowed_pattern, budget)
      } catch (err) {
        if (err instanceof BudgetExceeded) err.at(formatPath(at))
        throw err
      }
      if (compiled.ok) return
      broken.add(name)
      issues.add('parameter', at, `Parameter '${name}': allowed_pattern ${JSON.stringify(c.allowed_pattern)} cannot be used: ${compiled.reason}`)
    })
  }
  return broken
}

function atParameter<T>(path: (string | number)[], fn: () => T): T {
  try {
    return fn()
  } catch (err) {
    if (err instanceof BudgetExceeded) err.at(formatPath(path))
    throw err
  }
}

/** A json value nested deeper than the budget allows is refused before anything walks it. */
function checkDepth(name: string, value: unknown, budget: Budget): void {
  // Named at the parameter: the keys inside a (perhaps hidden) value are not shown.
  if (deeperThan(value, budget.limits.maxDepth)) throw new BudgetExceeded('depth', budget.limits.maxDepth).at(formatPath(['parameters', name]))
}

export function resolveParameterValues(
  t: ParsedTemplate,
  env: Environment,
  given: Record<string, unknown>,
  pseudo: PseudoParameters,
  issues: IssueList,
  budget: Budget,
): Record<string, unknown> {
  const values: Record<string, unknown> = {
    'OS::stack_name': pseudo.stackName ?? '',
    'OS::stack_id': pseudo.stackId ?? '',
    'OS::project_id': pseudo.projectId ?? '',
  }
  for (const name of Object.keys(given)) {
    if (!(name in t.parameters)) issues.add('parameter', ['parameters', name], `the parameter ${name} was given a value but is not defined in the template`)
  }
  for (const name of Object.keys(env.parameters)) {
    if (!(name in t.parameters)) issues.add('parameter', ['environment', 'parameters', name], `the environment sets parameter ${name}, which the template does not define`)
  }
  const check = !pseudo.validated
  const unusable = check ? patternIssues(t, issues, budget) : new Set<string>()
  for (const [name, p] of Object.entries(t.parameters)) {
    budget.op()
    const path = ['parameters', name]
    // Defaults are checked even when a value is given, as Heat validates the template itself.
    if (p.default !== undefined && check) {
      const d = convertParameter(p, p.default)
      if (!d.ok) issues.add('parameter', [...path, 'default'], `Parameter '${name}' default is invalid: ${d.message}`)
      else if (!unusable.has(name)) {
        checkDepth(name, d.value, budget)
        const broken = atParameter([...path, 'default'], () => checkConstraints(p, d.value, budget))
        if (broken) issues.add('constraint', [...path, 'default'], `Parameter '${name}' default is invalid: ${broken}`)
      }
    }
    const raw = name in given ? given[name] : name in env.parameters ? env.parameters[name] : name in env.parameterDefaults ? env.parameterDefaults[name] : p.default
    if ((raw === undefined || raw === null) && pseudo.allowMissing) {
      values[name] = UNKNOWN
      continue
    }
    if (raw === undefined || raw === null) {
      issues.add('parameter', path, `The Parameter (${name}) has no value: give one with the request or the environment, or a default in the template`)
      continue
    }
    const c = convertParameter(p, raw)
    if (!c.ok) {
      issues.add('parameter', path, `Parameter '${name}' is invalid: ${c.message}`)
      continue
    }
    checkDepth(name, c.value, budget)
    const broken = check && !unusable.has(name) ? atParameter(path, () => checkConstraints(p, c.value, budget)) : null
    if (broken) {
      issues.add('constraint', path, `Parameter '${name}' is invalid: ${broken}`)
      continue
    }
    values[name] = c.value
  }
  return values
}
