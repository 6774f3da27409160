/**
 * Checking a submission (template + environment + parameters) once, at the
 * boundary, before anything is written: every problem comes back as a
 * ValidationError listing each issue with its path, line and column.
 */
import type { TypeCatalog } from '../template/types'
import { TemplateError, type Environment, type ParsedTemplate, type StackDefinition } from '../template/types'
import { buildDefinition, parseEnvironment, parseTemplate } from '../template'
import type { TraversalPlan } from '../db/queries/traversal'
import { LimitError, ValidationError } from './errors'
import { hiddenValues, redactText, secretList } from './secrets'

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

export interface CheckedSubmission {
  source: string
  template: ParsedTemplate
  environment: Environment
  /** environment as stored (plain object) */
  environmentJson: Record<string, unknown>
  parameters: Record<string, unknown>
  definition: StackDefinition
  plan: TraversalPlan
}

export interface CheckContext {
  catalog: TypeCatalog
  limits: Limits
  stackName: string
  stackId?: string
  projectId?: string
  /** parameters without a value are not an error (validating for an editor) */
  allowMissingParameters?: boolean
}

function asSource(t: string | Record<string, unknown>): string {
  return typeof t === 'string' ? t : JSON.stringify(t, null, 2)
}

/** The order new rows are inserted in (dependents first, as Heat's reverse topological walk). */
export function planFor(definition: StackDefinition): TraversalPlan {
  const names = Object.keys(definition.resources)
  const types: Record<string, string> = {}
  const dependsOn: Record<string, string[]> = {}
  for (const [name, r] of Object.entries(definition.resources)) {
    types[name] = r.type
    dependsOn[name] = r.dependsOn
  }
  return { names, types, dependsOn }
}

export function checkSubmission(sub: Submission, ctx: CheckContext): CheckedSubmission {
  const source = asSource(sub.template)
  const bytes = Buffer.byteLength(source)
  if (bytes > ctx.limits.maxTemplateBytes) {
    throw new LimitError(`the template is ${bytes} bytes; the limit is ${ctx.limits.maxTemplateBytes}`, 'template_bytes', ctx.limits.maxTemplateBytes)
  }
  let template: ParsedTemplate | undefined
  try {
    template = parseTemplate(source, { maxBytes: ctx.limits.maxTemplateBytes })
    const environment = parseEnvironment(sub.environment)
    const definition = buildDefinition(template, {
      environment,
      parameters: sub.parameters ?? {},
      types: ctx.catalog,
      maxResources: ctx.limits.maxResourcesPerStack,
      allowMissingParameters: ctx.allowMissingParameters === true,
      stackName: ctx.stackName,
      stackId: ctx.stackId,
      projectId: ctx.projectId,
    })
    return {
      source,
      template,
      environment,
      environmentJson: environmentToJson(environment),
      parameters: sub.parameters ?? {},
      definition,
      plan: planFor(definition),
    }
  } catch (err) {
    if (err instanceof TemplateError) {
      // A message may quote a value (`Value '…' is not a number`): never a hidden parameter's.
      const secrets = submissionSecrets(template, sub)
      const clean = (m: string) => redactText(m, secrets)
      const limit = err.issues.find((i) => i.code === 'limit')
      if (limit) throw new LimitError(clean(limit.message), 'resources_per_stack', ctx.limits.maxResourcesPerStack)
      throw new ValidationError(clean(err.message), err.issues.map((i) => ({ ...i, message: clean(i.message) })))
    }
    throw err
  }
}

/** Hidden parameters' values in a submission (request, environment, defaults), for masking messages. */
function submissionSecrets(template: ParsedTemplate | undefined, sub: Submission): string[] {
  if (!template) return []
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
  if (Object.keys(env.resourceRegistry).length) out.resource_registry = env.resourceRegistry
  return out
}

/** The template a DELETE converges to: nothing. */
export const EMPTY_TEMPLATE_SOURCE = 'heat_template_version: 2013-05-23\nresources: {}\n'
