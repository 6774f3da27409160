/**
 * The `parameters` section: types, defaults, hidden, constraints — checked
 * for shape here; values are resolved in parameters.ts.
 */
import type { IssueList } from './issues'
import type { ParameterConstraint, ParameterSchema, ParameterType } from './types'

const TYPES: ParameterType[] = ['string', 'number', 'boolean', 'json', 'comma_delimited_list']
const KEYS = ['type', 'default', 'hidden', 'label', 'description', 'constraints', 'immutable', 'tags']
const CONSTRAINT_KEYS = ['length', 'range', 'allowed_values', 'allowed_pattern', 'custom_constraint']
/** Which constraints make sense for which types (Heat's parameters.py). */
const ALLOWED_FOR: Record<string, ParameterType[]> = {
  length: ['string', 'comma_delimited_list', 'json'],
  range: ['number'],
  allowed_values: ['string', 'number', 'comma_delimited_list', 'boolean'],
  allowed_pattern: ['string'],
  custom_constraint: TYPES,
}

const isMap = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)
const isNum = (v: unknown) => typeof v === 'number' && Number.isFinite(v)

export function parseParameterSchemas(raw: unknown, issues: IssueList): Record<string, ParameterSchema> {
  const out: Record<string, ParameterSchema> = {}
  if (raw === undefined || raw === null) return out
  if (!isMap(raw)) {
    issues.add('structure', ['parameters'], 'parameters must be a map of parameter names to definitions')
    return out
  }
  for (const [name, p] of Object.entries(raw)) {
    const path = ['parameters', name]
    if (!isMap(p)) {
      issues.add('parameter', path, `parameter ${name} must be a map with a "type"`)
      continue
    }
    for (const k of Object.keys(p)) if (!KEYS.includes(k)) issues.add('parameter', [...path, k], `unknown key "${k}" in parameter ${name}; valid keys are ${KEYS.join(', ')}`)
    const type = p.type as ParameterType
    if (!TYPES.includes(type)) {
      issues.add('parameter', [...path, 'type'], `parameter ${name} has ${p.type === undefined ? 'no type' : `unknown type "${String(p.type)}"`}; use one of ${TYPES.join(', ')}`)
      continue
    }
    for (const k of ['hidden', 'immutable'] as const) {
      if (p[k] !== undefined && typeof p[k] !== 'boolean') issues.add('parameter', [...path, k], `${k} must be true or false`)
    }
    for (const k of ['label', 'description'] as const) {
      if (p[k] !== undefined && typeof p[k] !== 'string') issues.add('parameter', [...path, k], `${k} must be a string`)
    }
    const constraints = parseConstraints(p.constraints, type, [...path, 'constraints'], issues)
    out[name] = {
      name,
      type,
      ...(typeof p.label === 'string' ? { label: p.label } : {}),
      ...(typeof p.description === 'string' ? { description: p.description } : {}),
      ...(p.default !== undefined ? { default: p.default } : {}),
      hidden: p.hidden === true,
      immutable: p.immutable === true,
      constraints,
    }
  }
  return out
}

function parseConstraints(raw: unknown, type: ParameterType, path: (string | number)[], issues: IssueList): ParameterConstraint[] {
  if (raw === undefined || raw === null) return []
  if (!Array.isArray(raw)) {
    issues.add('parameter', path, 'constraints must be a list')
    return []
  }
  const out: ParameterConstraint[] = []
  raw.forEach((c, i) => {
    const cpath = [...path, i]
    if (!isMap(c)) return issues.add('parameter', cpath, 'a constraint must be a map such as {length: {min: 1}}')
    const kinds = Object.keys(c).filter((k) => k !== 'description')
    if (kinds.length !== 1 || !CONSTRAINT_KEYS.includes(kinds[0]!)) {
      return issues.add('parameter', cpath, `a constraint needs exactly one of ${CONSTRAINT_KEYS.join(', ')} (and an optional description)`)
    }
    const kind = kinds[0]!
    if (!ALLOWED_FOR[kind]!.includes(type)) return issues.add('parameter', [...cpath, kind], `constraint ${kind} does not apply to a ${type} parameter`)
    if (c.description !== undefined && typeof c.description !== 'string') issues.add('parameter', [...cpath, 'description'], 'description must be a string')
    const description = typeof c.description === 'string' ? { description: c.description } : {}
    const arg = c[kind]
    switch (kind) {
      case 'length':
      case 'range': {
        if (!isMap(arg) || (arg.min === undefined && arg.max === undefined) || Object.keys(arg).some((k) => k !== 'min' && k !== 'max') || ![arg.min, arg.max].every((x) => x === undefined || isNum(x))) {
          return issues.add('parameter', [...cpath, kind], `${kind} needs a numeric min and/or max`)
        }
        if (isNum(arg.min) && isNum(arg.max) && (arg.min as number) > (arg.max as number)) return issues.add('parameter', [...cpath, kind], `${kind}: min is greater than max`)
        const bounds = { ...(arg.min !== undefined ? { min: arg.min as number } : {}), ...(arg.max !== undefined ? { max: arg.max as number } : {}) }
        out.push(kind === 'length' ? { length: bounds, ...description } : { range: bounds, ...description })
        return
      }
      case 'allowed_values':
        if (!Array.isArray(arg) || arg.length === 0) return issues.add('parameter', [...cpath, kind], 'allowed_values needs a non-empty list')
        out.push({ allowed_values: arg, ...description })
        return
      case 'allowed_pattern':
        // Compiled (by RE2, with its cost charged) when values are checked: parameters.ts.
        if (typeof arg !== 'string') return issues.add('parameter', [...cpath, kind], 'allowed_pattern needs a regular expression string')
        out.push({ allowed_pattern: arg, ...description })
        return
      default:
        if (typeof arg !== 'string') return issues.add('parameter', [...cpath, kind], 'custom_constraint needs a name')
        // Heat's custom constraints look a value up in an OpenStack service (nova.flavor, neutron.network, …) or
        // parse a format Kiln does not implement: refused, rather than accepted and never checked.
        return issues.add('parameter', [...cpath, kind], `custom_constraint ${arg} is not supported: Kiln has none of Heat's custom constraints; use allowed_values or allowed_pattern`)
    }
  })
  return out
}
