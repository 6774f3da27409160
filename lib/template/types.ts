/**
 * Public types of the HOT template module (lib/template). The engine, the
 * service layer, the API and the UI use only what is exported from
 * lib/template/index.ts, and these types.
 *
 * Pipeline:
 *   parseTemplate(source)            YAML/JSON text -> ParsedTemplate (structure checked, positions kept)
 *   parseEnvironment(source)         environment text/object -> Environment
 *   buildDefinition(t, opts)         parameters + conditions resolved -> StackDefinition (deps, cycles checked)
 *   resolveProperties(def, name, ctx)  intrinsic functions evaluated with the values of other resources
 *   resolveOutputs(def, ctx)
 * Every problem is a TemplateIssue naming the template path, line and column.
 */
import type { Budget } from './budget'
import type { Secrets } from './secrecy'

/** 1-based line and column in the submitted text. */
export interface SourcePosition {
  line: number
  column: number
}

export type TemplateIssueCode =
  | 'syntax' // YAML/JSON that does not parse
  | 'structure' // unknown section, wrong type of a section or key
  | 'version' // heat_template_version missing or unsupported
  | 'parameter' // parameter schema problems, missing or wrongly typed values
  | 'constraint' // a parameter value breaks a constraint
  | 'function' // unknown intrinsic function or wrong arguments
  | 'reference' // get_resource/get_attr/depends_on/get_param/condition naming something that does not exist
  | 'cycle' // dependency cycle(s)
  | 'property' // resource properties do not match the type's schema
  | 'type' // unknown resource type
  | 'limit' // template too large / too many resources
  | 'budget' // evaluation ran out of a budget (operations, output, depth, time)

export interface TemplateIssue {
  code: TemplateIssueCode
  /** Dotted path in the template, e.g. `resources.web.properties.flavor` or `parameters.size.constraints[0]`. */
  path: string
  /** Position of that path in the source text; null when the template came as an object without text. */
  line: number | null
  column: number | null
  message: string
  /** For `cycle`: every cycle, each as the list of resource names in order (deterministic). */
  cycles?: string[][]
  /** For `limit` and `budget`: which limit, and its value. */
  limit?: { name: string; max: number }
}

/** Thrown by parse/build functions; carries every issue found, not only the first. */
export class TemplateError extends Error {
  override name = 'TemplateError'
  constructor(public readonly issues: TemplateIssue[]) {
    super(issues.map((i) => `${i.path}${i.line ? ` (line ${i.line}, column ${i.column})` : ''}: ${i.message}`).join('; '))
  }
}

export type ParameterType = 'string' | 'number' | 'boolean' | 'json' | 'comma_delimited_list'

export type ParameterConstraint =
  | { length: { min?: number; max?: number }; description?: string }
  | { range: { min?: number; max?: number }; description?: string }
  | { allowed_values: unknown[]; description?: string }
  | { allowed_pattern: string; description?: string }
  | { custom_constraint: string; description?: string }

export interface ParameterSchema {
  name: string
  type: ParameterType
  label?: string
  description?: string
  default?: unknown
  hidden: boolean
  immutable: boolean
  constraints: ParameterConstraint[]
}

export interface ParameterGroup {
  label?: string
  description?: string
  parameters: string[]
}

export interface OutputSnippet {
  description?: string
  /** Unevaluated expression. */
  value: unknown
  condition?: unknown
  /** Its static evaluation read a secret (a hidden parameter): its value is secret. */
  sensitive?: boolean
}

export interface ResourceSnippet {
  type: string
  properties: Record<string, unknown>
  dependsOn: string[]
  /** As written: Delete, Retain or Snapshot, or a function (get_param) evaluated with the definition. */
  deletionPolicy: unknown
  metadata: Record<string, unknown>
  condition?: unknown
  updatePolicy?: Record<string, unknown>
  /** As written: the id of an object to adopt, or a function (get_param) evaluated with the definition. */
  externalId?: unknown
  description?: string
}

export interface ParsedTemplate {
  /** heat_template_version as written (a date or a release name such as `wallaby`), normalised to the date. */
  version: string
  description?: string
  parameters: Record<string, ParameterSchema>
  parameterGroups: ParameterGroup[]
  conditions: Record<string, unknown>
  resources: Record<string, ResourceSnippet>
  outputs: Record<string, OutputSnippet>
  /** The whole template as plain JSON (what is stored). */
  json: Record<string, unknown>
  /** Position of a template path (`['resources', 'web', 'properties', 'flavor']`) in the source, if known. */
  positionOf(path: ReadonlyArray<string | number>): SourcePosition | null
}

/** Heat's hooks Kiln honours (lib/template/hooks.ts). */
export type HookType = 'pre-create' | 'pre-update' | 'pre-delete'

export interface HookRule {
  /** A resource name, or a pattern with `*`, `?` and `[…]` (Python's fnmatchcase). */
  pattern: string
  hooks: HookType[]
}

export interface Environment {
  parameters: Record<string, unknown>
  parameterDefaults: Record<string, unknown>
  /** `resource_registry` aliases: template type name -> registered type name. */
  resourceRegistry: Record<string, string>
  /** `resource_registry.resources`: the hooks set on resources by name or pattern (lib/template/hooks.ts). */
  hooks?: HookRule[]
}

/** What the template module needs to know about resource types (implemented by lib/resources). */
export interface TypeCatalog {
  /** The property schema of a registered type, or undefined if unknown. */
  has(typeName: string): boolean
  /** Check literal property values; entries whose value is an intrinsic function are not checked. */
  validateProperties(typeName: string, properties: Record<string, unknown>): { path: string; message: string }[]
  /** Attribute names the type declares (get_attr on an unknown attribute is an error). */
  attributes(typeName: string): string[] | undefined
  /** Whether the type can adopt an existing object (a resource's `external_id`). */
  adopts?(typeName: string): boolean
  /** Whether the type can keep a snapshot of its object when it is deleted (deletion_policy: Snapshot). */
  snapshots?(typeName: string): boolean
  /** The same catalog as plain data, from which an evaluation thread rebuilds it (lib/resources/catalog.ts). */
  readonly data: CatalogData
}

/** Per type: its property schemas (lib/resources PropertySchema), declared attributes (null: any) and whether it takes any property. */
export type CatalogData = Record<string, { properties: Record<string, unknown>; attributes: string[] | null; acceptsAnyProperties: boolean; adopts?: boolean; snapshots?: boolean; owner?: string; replaceOnEveryUpdate?: boolean }>

export interface BuildOptions {
  /** The evaluation's budget (default: a new one with the default limits). */
  budget?: Budget
  /**
   * A stored template, checked when it was submitted: parameter values and
   * defaults are not checked against their constraints again (so a rebuild
   * never compiles or runs a tenant's pattern).
   */
  validated?: boolean
  /** Build only what outputs need (parameters, conditions, outputs): resources are not evaluated. */
  outputsOnly?: boolean
  environment?: Environment
  /** Parameter values given with the request (override environment `parameters`). */
  parameters?: Record<string, unknown>
  /** Validate resource types and literal properties against this catalog. */
  types?: TypeCatalog
  /** Parameters without a value become UNKNOWN instead of an error (validating a template for an editor). */
  allowMissingParameters?: boolean
  /** Upper bound on the number of resources (issue code `limit`). */
  maxResources?: number
  /** Value of the pseudo parameters OS::stack_name / OS::stack_id / OS::project_id. */
  stackName?: string
  stackId?: string
  projectId?: string
}

export interface ResourceDefinition {
  name: string
  /** Type after `resource_registry` aliasing. */
  type: string
  /** Unevaluated properties: get_param, conditions and other static functions already applied;
   *  get_resource / get_attr (and functions over them) remain, to be evaluated by resolveProperties. */
  properties: Record<string, unknown>
  /** Every resource this one depends on: explicit depends_on plus get_resource/get_attr references. Sorted. */
  dependsOn: string[]
  deletionPolicy: 'Delete' | 'Retain' | 'Snapshot'
  metadata: Record<string, unknown>
  /** Forms of secret values the static phase derived in the properties (a hidden parameter's `str_split` pieces, …). */
  secretForms?: string[]
  /** Heat's `external_id`: the object this resource adopts instead of creating one. */
  externalId?: string
  description?: string

}

/** What the engine, reads and previews use of a definition: plain data and Deferred nodes, no functions. */
export interface PortableDefinition {
  /** Resolved parameter values by name (typed: numbers are numbers, lists are arrays, json is parsed). */
  parameters: Record<string, unknown>
  /** Names of hidden parameters (their values must never be shown). */
  hiddenParameters: string[]
  /** Every textual form of the hidden parameters' values, longest first (lib/template/secrecy.ts). */
  secretForms: string[]
  /** Resources whose condition holds, by name. */
  resources: Record<string, ResourceDefinition>
  outputs: Record<string, OutputSnippet>
  /** The environment's hooks: where a traversal stops until they are cleared. */
  hooks?: HookRule[]
}

export interface StackDefinition {
  template: ParsedTemplate
  /** Resolved parameter values by name (typed: numbers are numbers, lists are arrays, json is parsed). */
  parameters: Record<string, unknown>
  /** Names of hidden parameters (their values must never be shown). */
  hiddenParameters: string[]
  /** Every textual form of the hidden parameters' values, longest first (lib/template/secrecy.ts). */
  secretForms: string[]
  /** Resources whose condition holds, by name. */
  resources: Record<string, ResourceDefinition>
  outputs: Record<string, OutputSnippet>
  /** Every named condition's value (a preview shows which changed). */
  conditions: Record<string, boolean>
  /** Resources the template defines whose condition is false, with that condition as written. */
  disabled: Record<string, unknown>
  /** The environment's hooks (lib/template/hooks.ts). */
  hooks?: HookRule[]
}

/** Values of other resources, provided by the engine when resolving. */
export interface ResolveContext {
  /** `get_resource`: the reference id (physical id) of a resource, or UNKNOWN if it has none yet. */
  getResource(name: string): unknown
  /** `get_attr`: the whole value of one attribute of a resource, or UNKNOWN. The template module
   *  applies any nested path (`get_attr: [r, attr, key, 0]`) itself. */
  getAttr(name: string, attribute: string): unknown
  /** `get_attr: [name]`: every attribute value the resource has (null: none yet), or UNKNOWN. */
  getAttrs?(name: string): Record<string, unknown> | null | Unknown
  /** Whether the resource's type declares this attribute `secret` (absent: none is). */
  secretAttribute?(name: string, attribute: string): boolean
  /** Secret forms the resource's row was made from (its stored secret_forms): an attribute holding one is secret. */
  secretFormsOf?(name: string): Secrets | undefined
}

/**
 * Marker for a value that cannot be known yet (preview: depends on a resource
 * that has not been created or will change). Functions over an UNKNOWN give UNKNOWN.
 */
export const UNKNOWN: unique symbol = Symbol.for('kiln.template.unknown')
export type Unknown = typeof UNKNOWN

/** A stored template (raw_template) and the stack it belongs to. */
export interface StoredTemplate {
  /** The text, or null when the parsed form is given instead (the engine reads the parsed JSON). */
  source: string | null
  parsed: Record<string, unknown> | null
  environment: unknown
  parameters: Record<string, unknown>
  stackName: string
  stackId: string
  projectId: string
}

/** What a resolution may read of another resource. */
export interface ResourceValues {
  name: string
  physicalId: string | null
  attributes: Record<string, unknown> | null
  /** Attributes its type declares secret. */
  secretAttributes?: string[]
  /** The secret forms its row was made from (resource.secret_forms). */
  secretForms?: string[]
}
