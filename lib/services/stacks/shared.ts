/**
 * The steps every stack operation shares: finding the stack of the actor's
 * project, starting a traversal (lib/db/queries/traversal.ts, one
 * transaction; nothing waits for it to finish), and the plan of a stored
 * template (a rollback's target, a check's).
 */
import type { Db } from '../../db/client'
import { findStack } from '../../db/queries/stacks'
import { templateById } from '../../db/queries/templates'
import { startTraversal, type StartTraversalInput } from '../../db/queries/traversal'
import type { StackAction, TraversalPlan } from '../../engine/types'
import { definitionOf } from '../../evaluation/bounded'
import { UUID } from '../../ids'
import { ConflictError, NotFoundError } from '../../plan/errors'
import { budgetError, planFor } from '../../plan/template-check'
import { BudgetExceeded } from '../../template/budget'
import type { Actor, OperationResult, StackRecord } from './types'

type Pool = Db['pool']

/** A stack of the actor's project by id or name. Other projects' stacks are "not found" (never revealed). */
export async function findOwnStack(pool: Pool, actor: Actor, ref: string, opts: { includeDeleted?: boolean } = {}): Promise<StackRecord> {
  const stack = await findStack(pool, actor.projectId, ref, { byId: UUID.test(ref), includeDeleted: opts.includeDeleted })
  if (!stack) throw new NotFoundError(`stack ${ref} not found`)
  return stack
}

/** Start a traversal; a refusal is a 404 (the stack is gone) or a 409 naming why. */
export async function startOperation(pool: Pool, input: StartTraversalInput, stack: { id: string; name: string }, action: StackAction): Promise<OperationResult> {
  const res = await startTraversal(pool, input)
  if (!res.started) {
    if (res.reason === 'not_found') throw new NotFoundError(`stack ${stack.name} not found`)
    throw new ConflictError(res.detail ?? `the ${action} could not start`)
  }
  return { stack, traversalId: res.traversalId, action, superseded: res.superseded }
}

/** A stored template's definition (and its parsed JSON). */
export async function storedDefinition(pool: Pool, stack: StackRecord, templateId: string) {
  const t = await templateById(pool, templateId)
  if (!t) throw new ConflictError('the stored template is missing')
  const parsed = t.template && Object.keys(t.template).length ? (t.template as Record<string, unknown>) : null
  try {
    const definition = await definitionOf({ source: parsed ? null : t.source, parsed, environment: t.environment, parameters: t.parameters, stackName: stack.name, stackId: stack.id, projectId: stack.projectId })
    return { definition, parsed }
  } catch (err) {
    if (err instanceof BudgetExceeded) throw budgetError(err)
    throw err
  }
}

/** The plan of a stored template (rollback target, check): evaluated within the inline allowance, or on a thread. */
export async function storedPlan(pool: Pool, stack: StackRecord, templateId: string, opts: { fingerprints?: boolean } = {}): Promise<TraversalPlan> {
  return planFor((await storedDefinition(pool, stack, templateId)).definition, opts)
}
