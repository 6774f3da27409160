/**
 * parseEnvironment: a Heat environment (`parameters`, `parameter_defaults`,
 * `resource_registry`) given as YAML/JSON text or an object. The registry
 * takes type aliases (`My::Server: OS::Heat::None`) and hooks per resource
 * (`resources: {db: {hooks: pre-create}}`, lib/template/hooks.ts), not
 * nested template files or per-resource type overrides, since Kiln has no
 * file store to fetch them from; those are reported as errors rather than ignored,
 * as are Heat's sections Kiln cannot honour (event_sinks,
 * parameter_merge_strategies, encrypted_param_names) when they are not empty.
 * Issues are prefixed `environment.` so they never look like template paths.
 */
import { BudgetExceeded, DEFAULT_EVALUATION_LIMITS, deeperThan } from './budget'
import { IssueList } from './issues'
import { isMap, readYaml } from './parse'
import { formatPath, PositionIndex, type PathPart } from './positions'
import { readHookRules, type HookRule } from './hooks'
import type { Environment } from './types'

const SECTIONS = ['parameters', 'parameter_defaults', 'resource_registry', 'encrypted_param_names', 'event_sinks', 'parameter_merge_strategies']
const PREFIX: PathPart[] = ['environment']

/** Heat's environment sections Kiln has nothing to honour them with: refused unless empty. */
const UNHONOURED: Record<string, string> = {
  event_sinks: 'event_sinks are not supported: Kiln has no Zaqar queues to send events to (follow them with GET /api/stacks/{stack}/events or the live stream)',
  parameter_merge_strategies: 'parameter_merge_strategies are not supported: they apply when the server merges several environment files, and Kiln takes one environment (merge them before sending)',
  encrypted_param_names: 'encrypted_param_names is not supported: hidden parameters are masked, not encrypted, by Kiln',
}

export const EMPTY_ENVIRONMENT: Environment = Object.freeze({ parameters: {}, parameterDefaults: {}, resourceRegistry: {} }) as Environment

export function parseEnvironment(source: string | object | null | undefined, maxDepth = DEFAULT_EVALUATION_LIMITS.maxDepth): Environment {
  if (source === null || source === undefined) return { parameters: {}, parameterDefaults: {}, resourceRegistry: {} }
  let value: unknown = source
  let positions = PositionIndex.empty()
  if (typeof source === 'string') {
    if (!source.trim()) return { parameters: {}, parameterDefaults: {}, resourceRegistry: {} }
    ;({ value, positions } = readYaml(source, PREFIX, maxDepth))
  }
  // Values are walked recursively later (masking, storage): nothing deeper than a template may be.
  const tooDeep = deeperThan(value, maxDepth)
  // Named down to the parameter at most: the keys inside a (perhaps hidden) value are not shown.
  if (tooDeep) throw new BudgetExceeded('depth', maxDepth).at(formatPath([...PREFIX, ...tooDeep.slice(0, 2)]))
  // Positions index the environment's own text; issues carry the `environment.` prefix.
  const issues = new IssueList({ find: (p) => positions.find(p.slice(PREFIX.length)) }, PREFIX)
  if (!isMap(value)) {
    issues.add('structure', [], 'an environment must be a map with parameters, parameter_defaults and/or resource_registry')
    issues.throwIfAny()
  }
  const env = value as Record<string, unknown>
  for (const k of Object.keys(env)) {
    if (!SECTIONS.includes(k)) issues.add('structure', [k], `unknown environment section "${k}"; valid sections are parameters, parameter_defaults, resource_registry`)
  }
  // Heat's sections Kiln cannot honour are refused when they say anything, never ignored.
  for (const [k, why] of Object.entries(UNHONOURED)) {
    const v = env[k]
    if (v !== undefined && v !== null && !(Array.isArray(v) ? v.length === 0 : isMap(v) && Object.keys(v).length === 0)) issues.add('structure', [k], why)
  }
  const section = (key: string): Record<string, unknown> => {
    const v = env[key]
    if (v === undefined || v === null) return {}
    if (!isMap(v)) {
      issues.add('structure', [key], `${key} must be a map`)
      return {}
    }
    return v
  }
  const parameters = section('parameters')
  const parameterDefaults = section('parameter_defaults')
  const resourceRegistry: Record<string, string> = {}
  let hooks: HookRule[] = []
  for (const [from, to] of Object.entries(section('resource_registry'))) {
    if (typeof to === 'string' && !/\.(ya?ml|json|template)$/.test(to) && !to.includes('/')) {
      resourceRegistry[from] = to
    } else if (from === 'resources' && isMap(to)) {
      hooks = readHookRules(to, issues)
    } else {
      issues.add('structure', ['resource_registry', from], 'resource_registry entries must alias a type name to another type name (nested template files are not supported)')
    }
  }
  // An alias chain must end at a concrete name, not loop.
  for (const start of Object.keys(resourceRegistry)) {
    const seen = new Set<string>([start])
    let cur = resourceRegistry[start]!
    while (cur in resourceRegistry) {
      if (seen.has(cur)) {
        issues.add('structure', ['resource_registry', start], `resource_registry aliases loop: ${[...seen, cur].join(' -> ')}`)
        break
      }
      seen.add(cur)
      cur = resourceRegistry[cur]!
    }
  }
  issues.throwIfAny()
  return { parameters, parameterDefaults, resourceRegistry, ...(hooks.length ? { hooks } : {}) }
}

/** The type a template type name stands for after following registry aliases. */
export function aliasType(env: Environment, type: string): string {
  let cur = type
  for (let i = 0; i < 32 && cur in env.resourceRegistry; i++) cur = env.resourceRegistry[cur]!
  return cur
}
