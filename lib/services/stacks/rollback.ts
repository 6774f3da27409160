/**
 * Rolling a stack back: to the last template that completed, or, after a
 * failed create, to nothing. A user asks for it (rollback, cancel with
 * rollback); a worker starts it when a traversal failed and the stack rolls
 * back on failure, and needs nothing else of the stack service: this system
 * takes the database alone.
 */
import crypto from 'node:crypto'
import { liveStackById } from '../../db/queries/stacks'
import { insertTemplate } from '../../db/queries/templates'
import type { StartTraversalInput } from '../../db/queries/traversal'
import type { TraversalPlan } from '../../engine/types'
import { ConflictError } from '../../plan/errors'
import { EMPTY_TEMPLATE_SOURCE } from '../../plan/template-check'
import { startOperation, storedPlan } from './shared'
import type { OperationResult, StackRecord, StackResources } from './types'

export class RollbackSystem {
  constructor(private readonly resources: Pick<StackResources, 'db'>) {}

  /** Start a rollback of `stack`, by `actor`, if its current traversal is still `expect`. */
  async start(stack: StackRecord, actor: string, expect: string | null): Promise<OperationResult> {
    const { pool } = this.resources.db
    let templateId = stack.lastGoodTemplateId
    let plan: TraversalPlan = { names: [], types: {}, dependsOn: {} }
    let before: StartTraversalInput['before']
    if (templateId) plan = await storedPlan(pool, stack, templateId)
    else {
      // Rolling back a create: converge to nothing.
      templateId = crypto.randomUUID()
      const id = templateId
      before = (c) => insertTemplate(c, stack.id, { id, source: EMPTY_TEMPLATE_SOURCE, templateText: '{}', environment: {}, parameters: {} })
    }
    return startOperation(pool, { stackId: stack.id, action: 'ROLLBACK', rawTemplateId: templateId, plan, startedBy: actor, expectTraversalId: expect, before }, stack, 'ROLLBACK')
  }

  /** Worker job: the traversal failed and the stack rolls back on failure. No-op if the stack moved on. */
  async afterFailure(stackId: string, failedTraversalId: string): Promise<OperationResult | null> {
    const stack = await liveStackById(this.resources.db.pool, stackId)
    if (!stack) return null
    if (stack.currentTraversalId !== failedTraversalId || stack.status !== 'FAILED') return null
    try {
      return await this.start(stack, 'automatic rollback', failedTraversalId)
    } catch (err) {
      if (err instanceof ConflictError) return null
      throw err
    }
  }
}

/** What a worker needs to roll a stack back after a failed traversal. */
export type FailureRollback = Pick<RollbackSystem, 'afterFailure'>
