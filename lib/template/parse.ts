/**
 * parseTemplate: text (YAML or JSON) -> ParsedTemplate, with every structural
 * problem reported at its path, line and column.
 *
 * YAML is read as Heat reads it (YAML 1.1, so `yes`/`no` are booleans) except
 * that timestamps stay strings (`heat_template_version: 2013-05-23`), as in
 * Heat's template_format loader. Duplicate keys are an error; aliases are
 * limited (no "billion laughs").
 *
 * Before anything walks the value recursively, the resource count
 * (maxResources) and the nesting depth (maxDepth) are checked, in that order:
 * both are cheap, and a template refused by either costs no evaluation.
 */
import { isScalar, LineCounter, parseDocument, visit, type Document } from 'yaml'
import { BudgetExceeded, DEFAULT_EVALUATION_LIMITS, deeperThan } from './budget'
import { IssueList } from './issues'
import { formatPath, PositionIndex, type PathPart } from './positions'
import { parseParameterSchemas } from './parameter-schema'
import type { OutputSnippet, ParameterGroup, ParsedTemplate, ResourceSnippet } from './types'
import { TemplateError } from './types'
import { CONDITIONS_SINCE, EXTERNAL_ID_SINCE, normaliseVersion, VERSIONS } from './versions'

const SECTIONS = ['heat_template_version', 'description', 'parameter_groups', 'parameters', 'resources', 'outputs', 'conditions']
const RESOURCE_KEYS = ['type', 'properties', 'depends_on', 'deletion_policy', 'metadata', 'condition', 'update_policy', 'external_id', 'description']
const OUTPUT_KEYS = ['value', 'description', 'condition']
export const DELETION_POLICIES: Record<string, 'Delete' | 'Retain' | 'Snapshot'> = {
  Delete: 'Delete',
  delete: 'Delete',
  Retain: 'Retain',
  retain: 'Retain',
  Snapshot: 'Snapshot',
  snapshot: 'Snapshot',
}

const PY_TRUE = { identify: (v: unknown) => v === true, default: true, tag: 'tag:yaml.org,2002:bool', test: /^(?:[Yy]es|YES|[Tt]rue|TRUE|[Oo]n|ON)$/, resolve: () => true }
const PY_FALSE = { identify: (v: unknown) => v === false, default: true, tag: 'tag:yaml.org,2002:bool', test: /^(?:[Nn]o|NO|[Ff]alse|FALSE|[Oo]ff|OFF)$/, resolve: () => false }

/**
 * The yaml package's YAML 1.1 floats accept a mantissa without digits (`e0`, `E5`, `-e3`, `.`), which
 * it resolves to NaN: a resource named `e0` became "NaN". PyYAML's floats have at least one digit.
 */
function withDigit<T>(t: T): T {
  const tag = t as { tag?: string; test?: RegExp }
  if (tag.tag !== 'tag:yaml.org,2002:float' || !tag.test || /inf|nan/i.test(tag.test.source)) return t // (.inf and .nan have no digit)
  return { ...tag, test: new RegExp(tag.test.source.replace(/^\^/, '^(?=[-+]?[0-9_.]*[0-9])')) } as T
}

export const isMap = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

/**
 * Read YAML/JSON text into a plain value with its position index; syntax errors throw TemplateError.
 *
 * Text that is a JSON object is read with JSON.parse, as Heat does (its
 * template_format reads text starting with `{` with json.loads): some fifty
 * times faster than the YAML reader for a large generated template, and a key
 * given twice keeps its last value, as in Heat. Positions are then worked out
 * only if an issue needs one. Anything JSON.parse rejects (a YAML flow map, a
 * syntax error) goes to the YAML reader, which says where the problem is.
 */
export function readYaml(source: string, prefix: PathPart[] = [], maxDepth = DEFAULT_EVALUATION_LIMITS.maxDepth): { value: unknown; positions: PositionIndex } {
  if (source.trimStart().startsWith('{')) {
    try {
      return { value: JSON.parse(source) as unknown, positions: PositionIndex.lazy(source) }
    } catch {
      /* not JSON: read as YAML below */
    }
  }
  const lines = new LineCounter()
  // The yaml package's own duplicate-key check compares each key with every other key of its map:
  // 12 s for a 10,000-resource template. duplicateKeys() below does it with a Set.
  const doc = parseDocument(source, {
    version: '1.1',
    lineCounter: lines,
    uniqueKeys: false,
    prettyErrors: false,
    customTags: (tags) => [
      // PyYAML (which Heat uses) reads yes/no/on/off as booleans but not y/n: `{ get_param: n }` names a parameter.
      { ...PY_TRUE },
      { ...PY_FALSE },
      ...tags.filter((t) => (typeof t === 'object' ? t.tag !== 'tag:yaml.org,2002:timestamp' && t.tag !== 'tag:yaml.org,2002:bool' : true)).map((t) => (typeof t === 'object' ? withDigit(t) : t)),
    ],
  })
  const where = prefix.join('.') || '(document)'
  // The parser stops at its own stack's end on deep flow collections ([[[[…]]]]) and says so.
  if (doc.errors.some((e) => e.code === 'RESOURCE_EXHAUSTION')) throw new BudgetExceeded('depth', maxDepth).at(where)
  const errors = doc.errors.length ? doc.errors : duplicateKeys(doc)
  if (errors.length) {
    throw new TemplateError(
      errors.map((err) => {
        const p = lines.linePos(err.pos[0])
        return { code: 'syntax', path: where, line: p.line, column: p.col, message: err.message.split('\n')[0]! }
      }),
    )
  }
  let value: unknown
  try {
    value = doc.toJS({ maxAliasCount: 1000 })
  } catch (err) {
    throw new TemplateError([{ code: 'syntax', path: prefix.join('.') || '(document)', line: null, column: null, message: (err as Error).message }])
  }
  return { value, positions: PositionIndex.fromDocument(doc, lines) }
}

/** Keys given twice in one map (a map's keys compared through a Set: linear). */
function duplicateKeys(doc: Document): { pos: [number, number]; message: string }[] {
  const found: { pos: [number, number]; message: string }[] = []
  visit(doc, {
    Map(_, map) {
      const seen = new Set<string>()
      for (const pair of map.items) {
        if (!isScalar(pair.key)) continue
        const v = pair.key.value
        const key = `${typeof v}:${String(v)}`
        if (seen.has(key)) found.push({ pos: [pair.key.range?.[0] ?? 0, pair.key.range?.[1] ?? 0], message: 'Map keys must be unique' })
        seen.add(key)
      }
    },
  })
  return found
}

export interface ParseOptions {
  maxBytes?: number
  /** Refuse more resources than this (issue `limit`) before anything else is checked. */
  maxResources?: number
  /** Refuse lists and maps nested deeper than this (BudgetExceeded `depth`); default DEFAULT_EVALUATION_LIMITS.maxDepth. */
  maxDepth?: number
}

export function parseTemplate(source: string | object, opts: ParseOptions = {}): ParsedTemplate {
  let value: unknown
  let positions = PositionIndex.empty()
  if (typeof source === 'string') {
    const bytes = Buffer.byteLength(source)
    if (opts.maxBytes !== undefined && bytes > opts.maxBytes) {
      throw new TemplateError([{ code: 'limit', path: '(document)', line: null, column: null, message: `the template is ${bytes} bytes; the limit is ${opts.maxBytes}`, limit: { name: 'template_bytes', max: opts.maxBytes } }])
    }
    if (!source.trim()) throw new TemplateError([{ code: 'structure', path: '(document)', line: 1, column: 1, message: 'the template is empty' }])
    ;({ value, positions } = readYaml(source, [], opts.maxDepth))
  } else value = source
  const issues = new IssueList(positions)
  if (!isMap(value)) {
    issues.add('structure', [], 'a template must be a map of sections (heat_template_version, resources, …)')
    issues.throwIfAny()
  }
  const t = value as Record<string, unknown>
  const count = isMap(t.resources) ? Object.keys(t.resources).length : 0
  if (opts.maxResources !== undefined && count > opts.maxResources) {
    // No line and column: finding them reads the whole text again (seconds for a large JSON template).
    throw new TemplateError([{ code: 'limit', path: 'resources', line: null, column: null, message: `the template has ${count} resources; the limit is ${opts.maxResources}`, limit: { name: 'resources_per_stack', max: opts.maxResources } }])
  }
  const maxDepth = opts.maxDepth ?? DEFAULT_EVALUATION_LIMITS.maxDepth
  const tooDeep = deeperThan(t, maxDepth)
  if (tooDeep) throw new BudgetExceeded('depth', maxDepth).at(formatPath(tooDeep))

  for (const key of Object.keys(t)) {
    if (!SECTIONS.includes(key)) issues.add('structure', [key], `unknown section "${key}"; valid sections are ${SECTIONS.join(', ')}`)
  }
  const version = normaliseVersion(t.heat_template_version)
  if (t.heat_template_version === undefined) issues.add('version', [], 'heat_template_version is missing')
  else if (!version) {
    issues.add('version', ['heat_template_version'], `unsupported heat_template_version "${String(t.heat_template_version)}"; use one of ${VERSIONS.map((v) => v.date + (v.name ? ` (${v.name})` : '')).join(', ')}`)
  }
  const v = version ?? VERSIONS.at(-1)!.date
  if (t.description !== undefined && typeof t.description !== 'string') issues.add('structure', ['description'], 'description must be a string')

  const parameters = parseParameterSchemas(t.parameters, issues)
  const parameterGroups = parseGroups(t.parameter_groups, Object.keys(parameters), issues)

  let conditions: Record<string, unknown> = {}
  if (t.conditions !== undefined) {
    if (v < CONDITIONS_SINCE) issues.add('version', ['conditions'], `the conditions section needs heat_template_version ${CONDITIONS_SINCE} or later`)
    else if (!isMap(t.conditions)) issues.add('structure', ['conditions'], 'conditions must be a map of names to condition expressions')
    else conditions = t.conditions
  }

  const resources: Record<string, ResourceSnippet> = {}
  if (t.resources !== undefined && t.resources !== null && !isMap(t.resources)) issues.add('structure', ['resources'], 'resources must be a map of resource names to definitions')
  for (const [name, r] of Object.entries(isMap(t.resources) ? t.resources : {})) {
    const path = ['resources', name]
    if (!isMap(r)) {
      issues.add('structure', path, `resource ${name} must be a map with at least a "type"`)
      continue
    }
    for (const k of Object.keys(r)) if (!RESOURCE_KEYS.includes(k)) issues.add('structure', [...path, k], `unknown key "${k}" in resource ${name}; valid keys are ${RESOURCE_KEYS.join(', ')}`)
    if (typeof r.type !== 'string' || !r.type) issues.add('structure', [...path, 'type'], `resource ${name} needs a "type" string`)
    if (r.properties !== undefined && r.properties !== null && !isMap(r.properties)) issues.add('structure', [...path, 'properties'], 'properties must be a map')
    if (r.metadata !== undefined && r.metadata !== null && !isMap(r.metadata)) issues.add('structure', [...path, 'metadata'], 'metadata must be a map')
    if (r.update_policy !== undefined && !isMap(r.update_policy)) issues.add('structure', [...path, 'update_policy'], 'update_policy must be a map')
    let dependsOn: string[] = []
    if (typeof r.depends_on === 'string') dependsOn = [r.depends_on]
    else if (Array.isArray(r.depends_on) && r.depends_on.every((d) => typeof d === 'string')) dependsOn = r.depends_on as string[]
    else if (r.depends_on !== undefined && r.depends_on !== null) issues.add('structure', [...path, 'depends_on'], 'depends_on must be a resource name or a list of resource names')
    // A function (get_param) is kept as written and evaluated with the definition, as Heat resolves it.
    let deletionPolicy: unknown = 'Delete'
    if (r.deletion_policy !== undefined) {
      const dp = typeof r.deletion_policy === 'string' ? DELETION_POLICIES[r.deletion_policy] : undefined
      if (isMap(r.deletion_policy) && Object.keys(r.deletion_policy).length === 1) deletionPolicy = r.deletion_policy
      else if (!dp) issues.add('structure', [...path, 'deletion_policy'], `deletion_policy must be one of Delete, Retain, Snapshot, or a function giving one (got ${JSON.stringify(r.deletion_policy)})`)
      else deletionPolicy = dp
    }
    if (r.condition !== undefined && v < CONDITIONS_SINCE) issues.add('version', [...path, 'condition'], `condition needs heat_template_version ${CONDITIONS_SINCE} or later`)
    if (r.external_id !== undefined) {
      if (v < EXTERNAL_ID_SINCE) issues.add('version', [...path, 'external_id'], `external_id needs heat_template_version ${EXTERNAL_ID_SINCE} or later`)
      else if (!(typeof r.external_id === 'string' && r.external_id) && !(isMap(r.external_id) && Object.keys(r.external_id).length === 1)) {
        issues.add('structure', [...path, 'external_id'], 'external_id must be the id of the object to adopt (a non-empty string), or a function giving one')
      }
    }
    if (r.description !== undefined && r.description !== null && typeof r.description !== 'string') issues.add('structure', [...path, 'description'], 'description must be a string')
    resources[name] = {
      type: typeof r.type === 'string' ? r.type : '',
      properties: isMap(r.properties) ? r.properties : {},
      dependsOn,
      deletionPolicy,
      metadata: isMap(r.metadata) ? r.metadata : {},
      ...(r.condition !== undefined ? { condition: r.condition } : {}),
      ...(isMap(r.update_policy) ? { updatePolicy: r.update_policy } : {}),
      ...(r.external_id !== undefined && r.external_id !== null ? { externalId: r.external_id } : {}),
      ...(typeof r.description === 'string' ? { description: r.description } : {}),
    }
  }

  const outputs: Record<string, OutputSnippet> = {}
  if (t.outputs !== undefined && t.outputs !== null && !isMap(t.outputs)) issues.add('structure', ['outputs'], 'outputs must be a map of output names to definitions')
  for (const [name, o] of Object.entries(isMap(t.outputs) ? t.outputs : {})) {
    if (!isMap(o)) {
      issues.add('structure', ['outputs', name], `output ${name} must be a map with a "value"`)
      continue
    }
    for (const k of Object.keys(o)) if (!OUTPUT_KEYS.includes(k)) issues.add('structure', ['outputs', name, k], `unknown key "${k}" in output ${name}; valid keys are ${OUTPUT_KEYS.join(', ')}`)
    if (o.description !== undefined && typeof o.description !== 'string') issues.add('structure', ['outputs', name, 'description'], 'description must be a string')
    outputs[name] = { value: o.value ?? null, ...(typeof o.description === 'string' ? { description: o.description } : {}), ...(o.condition !== undefined ? { condition: o.condition } : {}) }
  }

  issues.throwIfAny()
  return {
    version: v,
    ...(typeof t.description === 'string' ? { description: t.description } : {}),
    parameters,
    parameterGroups,
    conditions,
    resources,
    outputs,
    json: t,
    positionOf: (path) => positions.find(path),
  }
}

function parseGroups(raw: unknown, names: string[], issues: IssueList): ParameterGroup[] {
  if (raw === undefined || raw === null) return []
  if (!Array.isArray(raw)) {
    issues.add('structure', ['parameter_groups'], 'parameter_groups must be a list')
    return []
  }
  const seen = new Map<string, number>()
  const groups: ParameterGroup[] = []
  raw.forEach((g, i) => {
    const path = ['parameter_groups', i]
    if (!isMap(g)) return issues.add('structure', path, 'a parameter group must be a map with "parameters"')
    for (const k of Object.keys(g)) if (!['label', 'description', 'parameters'].includes(k)) issues.add('structure', [...path, k], `unknown key "${k}" in a parameter group`)
    if (!Array.isArray(g.parameters) || !g.parameters.every((p) => typeof p === 'string')) {
      return issues.add('structure', [...path, 'parameters'], 'parameters of a group must be a list of parameter names')
    }
    g.parameters.forEach((p, j) => {
      if (!names.includes(p)) issues.add('reference', [...path, 'parameters', j], `parameter group refers to unknown parameter "${p}"`)
      if (seen.has(p)) issues.add('parameter', [...path, 'parameters', j], `parameter "${p}" is already in parameter group ${seen.get(p)}`)
      seen.set(p, i)
    })
    groups.push({
      ...(typeof g.label === 'string' ? { label: g.label } : {}),
      ...(typeof g.description === 'string' ? { description: g.description } : {}),
      parameters: g.parameters as string[],
    })
  })
  return groups
}
