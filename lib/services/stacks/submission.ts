/**
 * What a submission means before it is checked: the template, environment
 * and parameters an update, a preview or a plan stands for (PATCH semantics
 * reuse the stack's current ones), the context a check runs in, and the
 * request fields checked against the template (a new stack's name,
 * clear_parameters).
 */
import type { Db } from '../../db/client'
import type { StoredTemplateRow } from '../../db/queries/preview'
import { templateInputs } from '../../db/queries/templates'
import { ConflictError, ValidationError } from '../../plan/errors'
import type { CheckContext, CheckedSubmission, Submission } from '../../plan/template-check'
import type { Actor, StackRecord, StackResources, UpdateRequest } from './types'

const STACK_NAME = /^[a-zA-Z][a-zA-Z0-9_.-]{0,254}$/

/** A new stack's name: a letter, then letters, digits, _ . - (at most 255). */
export function refuseInvalidName(name: string): void {
  if (!STACK_NAME.test(name)) {
    throw new ValidationError(`invalid stack name "${name}": it must start with a letter and contain only letters, digits, _ . - (at most 255)`)
  }
}

/**
 * The submission an update, a preview or a plan means, given the stack's current template:
 * PATCH semantics (`existing`, or no template) reuse it and its parameters; given ones override.
 */
export function submissionFrom(current: Pick<StoredTemplateRow, 'source' | 'environment' | 'parameters'> | null, req: UpdateRequest): Submission {
  if (req.template && !req.existing) return { template: req.template, environment: req.environment, parameters: req.parameters }
  if (!current) throw new ConflictError('the stack has no template to reuse')
  // Heat's clear_parameters: the stored values (request and environment `parameters`) of these go, back to their defaults.
  const cleared = new Set(req.clearParameters ?? [])
  const keep = (o: Record<string, unknown> | undefined) => Object.fromEntries(Object.entries(o ?? {}).filter(([k]) => !cleared.has(k)))
  const env = current.environment as Record<string, unknown> | null
  return {
    template: req.template ?? current.source,
    environment: req.environment ?? (cleared.size && env?.parameters ? { ...env, parameters: keep(env.parameters as Record<string, unknown>) } : current.environment),
    parameters: { ...keep(current.parameters as Record<string, unknown> | undefined), ...(req.parameters ?? {}) },
  }
}

/** The submission an update or preview means: PATCH semantics reuse the current template and parameters. */
export async function submissionFor(pool: Db['pool'], stack: StackRecord, req: UpdateRequest): Promise<Submission> {
  if (req.template && !req.existing) return submissionFrom(null, req)
  if (!stack.rawTemplateId) throw new ConflictError('the stack has no template to reuse')
  return submissionFrom(await templateInputs(pool, stack.rawTemplateId), req)
}

/** What a submission to an existing stack is checked against. */
export const checkContext = (resources: StackResources, actor: Actor, stack: StackRecord): CheckContext => ({
  catalog: resources.catalog,
  limits: resources.limits,
  stackName: stack.name,
  stackId: stack.id,
  projectId: actor.projectId,
})

/** Heat's clear_parameters names parameters of the template: any other name is a 400 naming it. */
export function refuseUnknownClearParameters(req: UpdateRequest, checked: CheckedSubmission): void {
  const parameterNames = checked.summary.parameters.map((p) => p.name)
  const unknown = (req.clearParameters ?? []).filter((n) => !parameterNames.includes(n))
  if (!unknown.length) return
  throw new ValidationError(`clear_parameters: ${unknown.join(', ')} ${unknown.length === 1 ? 'is not a parameter' : 'are not parameters'} of the template`, unknown.map((n) => ({ code: 'parameter' as const, path: `clear_parameters.${n}`, line: null, column: null, message: `${n} is not a parameter of the template` })))
}
