/**
 * Checking a submission (template + environment + parameters) once, at the
 * boundary, before anything is written: every problem comes back as a
 * ValidationError listing each issue with its path, line and column; a
 * size limit as a LimitError (413); a spent evaluation budget as a
 * BudgetError (400) naming the budget.
 *
 * The check itself, as plain functions of plain data: what an evaluation
 * thread runs (lib/evaluation/tasks.ts). It imports nothing of the thread
 * pool, so the thread's code does not import the pool back; templates.ts
 * sends it to a thread.
 */
import type { TypeCatalog } from '../template/types'
import { TemplateError, type CatalogData, type Environment, type ParameterGroup, type ParameterSchema, type ParsedTemplate, type StackDefinition } from '../template/types'
import { buildDefinition, isKnown, parseEnvironment, parseTemplate } from '../template'
import { BUDGET_SETTINGS, BudgetExceeded, type Budget } from '../template/budget'
import type { ExternalPlan, TraversalPlan } from '../engine/types'
import { definitionFingerprint } from '../engine/adoption'
import { BudgetError, LimitError, ValidationError } from './errors'
import { hiddenValues, redactText, secretList, type Secrets } from './secrets'
import { catalogFromData } from '../resources/catalog'

export interface Submission {
  /** Template text (YAML or JSON) or an already-parsed object. */
  template: string | Record<string, unknown>
  environment?: string | Record<string, unknown>
  parameters?: Record<string, unknown>
}

export interface Limits {
  maxTemplateBytes: number
  maxResourcesPerStack: number
}

/** What validation reports of a template (the editor's parameter form, the validate routes). */
export interface TemplateSummary {
  version: string
  description?: string
  parameters: ParameterSchema[]
  parameterGroups: ParameterGroup[]
  outputs: string[]
}

export interface CheckedSubmission {
  source: string
  /** The parsed template as JSON text: what raw_template.template stores. */
  templateText: string
  /** environment as stored (plain object) */
  environmentJson: Record<string, unknown>
  parameters: Record<string, unknown>
  /** Every parameter's value as resolved (typed; hidden ones too: never sent to a client). */
  parameterValues: Record<string, unknown>
  plan: TraversalPlan
  summary: TemplateSummary
}

export interface CheckContext {
  catalog: TypeCatalog
  limits: Limits
  stackName: string
  stackId?: string
  projectId?: string
  /** parameters without a value are not an error (validating for an editor) */
  allowMissingParameters?: boolean
  /** The plan carries each resource's definitionFingerprint (a preempting update). */
  fingerprints?: boolean
}

/** A CheckContext as data, sent to an evaluation thread (the catalog as CatalogData). */
export type PortableCheckContext = Omit<CheckContext, 'catalog'> & { catalog: CatalogData }

function asSource(t: string | Record<string, unknown>): string {
  return typeof t === 'string' ? t : JSON.stringify(t, null, 2)
}

/** What a traversal is started from: the resource names in the order their new rows are inserted (the definition's), their types and dependencies, and the checks of adopted (external_id) resources. */
export function planFor(definition: Pick<StackDefinition, 'resources'>, opts: { fingerprints?: boolean } = {}): TraversalPlan {
  const names = Object.keys(definition.resources)
  const types: Record<string, string> = {}
  const dependsOn: Record<string, string[]> = {}
  const external: Record<string, ExternalPlan> = {}
  for (const [name, r] of Object.entries(definition.resources)) {
    types[name] = r.type
    dependsOn[name] = r.dependsOn
    if (r.externalId !== undefined) {
      const known = Object.fromEntries(Object.entries(r.properties).filter(([, v]) => isKnown(v)))
      const deferred = Object.keys(r.properties).filter((k) => !(k in known))
      external[name] = { externalId: r.externalId, fingerprint: definitionFingerprint(r), known, deferred }
    }
  }
  // Only when asked: hashing every resource's definition is work a plain submission does not need.
  const fingerprints = opts.fingerprints ? Object.fromEntries(Object.entries(definition.resources).map(([n, r]) => [n, definitionFingerprint(r)])) : undefined
  return { names, types, dependsOn, ...(Object.keys(external).length ? { external } : {}), ...(fingerprints ? { fingerprints } : {}) }
}

/** A spent budget as the service layer's error: a 400 naming the setting and the place. */
export function budgetError(err: BudgetExceeded): BudgetError {
  return new BudgetError(err.message, err.budget, BUDGET_SETTINGS[err.budget], err.max, err.path)
}

/**
 * The check itself, on the calling thread, against `budget`: what an
 * evaluation thread runs for checkSubmission (and, within a preview, for the
 * preview's template). Throws ValidationError, LimitError or BudgetError.
 */
export function checkSubmissionNow(sub: Submission, ctx: CheckContext, budget: Budget): { checked: CheckedSubmission; definition: StackDefinition } {
  // Objects come from a JSON body, nested at most MAX_JSON_DEPTH (lib/api/http.ts), or from a caller in this process.
  const source = asSource(sub.template)
  const bytes = Buffer.byteLength(source)
  if (bytes > ctx.limits.maxTemplateBytes) {
    throw new LimitError(`the template is ${bytes} bytes; the limit is ${ctx.limits.maxTemplateBytes}`, 'template_bytes', ctx.limits.maxTemplateBytes)
  }
  let template: ParsedTemplate | undefined
  try {
    const maxDepth = budget.limits.maxDepth
    template = parseTemplate(source, { maxBytes: ctx.limits.maxTemplateBytes, maxResources: ctx.limits.maxResourcesPerStack, maxDepth })
    const environment = parseEnvironment(sub.environment, maxDepth)
    const definition = buildDefinition(template, {
      environment,
      parameters: sub.parameters ?? {},
      // A type another project's provider brings is unknown to this one.
      types: ctx.projectId ? catalogFromData(ctx.catalog.data, ctx.projectId) : ctx.catalog,
      maxResources: ctx.limits.maxResourcesPerStack,
      allowMissingParameters: ctx.allowMissingParameters === true,
      stackName: ctx.stackName,
      stackId: ctx.stackId,
      projectId: ctx.projectId,
      budget,
    })
    const t = template
    const checked: CheckedSubmission = {
      source,
      templateText: JSON.stringify(t.json),
      environmentJson: environmentToJson(environment),
      parameters: sub.parameters ?? {},
      // Known values only: one left out while validating for an editor is UNKNOWN, which cannot cross to another thread.
      parameterValues: Object.fromEntries(Object.entries(definition.parameters).filter(([, v]) => isKnown(v))),
      plan: planFor(definition, { fingerprints: ctx.fingerprints === true }),
      summary: {
        version: t.version,
        ...(t.description !== undefined ? { description: t.description } : {}),
        parameters: Object.values(t.parameters),
        parameterGroups: t.parameterGroups,
        outputs: Object.keys(t.outputs),
      },
    }
    return { checked, definition }
  } catch (err) {
    if (err instanceof BudgetExceeded) throw budgetError(err)
    if (err instanceof TemplateError) {
      // A message may quote a value (`Value '…' is not a number`): never a hidden parameter's.
      const secrets = submissionSecrets(template, sub)
      const clean = (m: string) => redactText(m, secrets)
      const limit = err.issues.find((i) => i.code === 'limit')
      if (limit) throw new LimitError(clean(limit.message), limit.limit?.name ?? 'resources_per_stack', limit.limit?.max ?? ctx.limits.maxResourcesPerStack)
      throw new ValidationError(clean(err.message), err.issues.map((i) => ({ ...i, message: clean(i.message) })))
    }
    throw err
  }
}

export function portable(ctx: CheckContext): PortableCheckContext {
  const { catalog, ...rest } = ctx
  return { ...rest, catalog: catalog.data }
}

/** Hidden parameters' values in a submission (request, environment, defaults), for masking messages. */
export function submissionSecrets(template: ParsedTemplate | undefined, sub: Submission): Secrets {
  if (!template) return secretList([])
  let env: Record<string, unknown> = {}
  try {
    const e = parseEnvironment(sub.environment)
    env = { parameters: e.parameters, parameter_defaults: e.parameterDefaults }
  } catch {
    if (sub.environment && typeof sub.environment === 'object') env = sub.environment
  }
  const section = (k: string) => (env[k] && typeof env[k] === 'object' ? (env[k] as Record<string, unknown>) : undefined)
  return secretList(hiddenValues(template.parameters, [sub.parameters, section('parameters'), section('parameter_defaults')]))
}

export function environmentToJson(env: Environment): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  if (Object.keys(env.parameters).length) out.parameters = env.parameters
  if (Object.keys(env.parameterDefaults).length) out.parameter_defaults = env.parameterDefaults
  const hooks = env.hooks?.length ? { resources: Object.fromEntries(env.hooks.map((h) => [h.pattern, { hooks: h.hooks }])) } : {}
  if (Object.keys(env.resourceRegistry).length || env.hooks?.length) out.resource_registry = { ...env.resourceRegistry, ...hooks }
  return out
}

/** The template a DELETE converges to: nothing. */
export const EMPTY_TEMPLATE_SOURCE = 'heat_template_version: 2013-05-23\nresources: {}\n'
