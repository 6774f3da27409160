/**
 * The stack operations other than an update: create, delete (also while
 * IN_PROGRESS: aborts in-flight actions), cancel (with or without rollback),
 * rollback, check, and drift (a check of every object against what was
 * stored). Each starts a traversal, or stops one, in one transaction.
 */
import crypto from 'node:crypto'
import { insertStackWithTemplate } from '../../db/queries/stacks'
import { insertTemplate, templateInputs } from '../../db/queries/templates'
import { stopTraversal } from '../../db/queries/traversal'
import { ConflictError } from '../../plan/errors'
import { EMPTY_TEMPLATE_SOURCE } from '../../plan/template-check'
import { checkSubmission } from '../templates'
import { refuseCancel, refuseLook, refuseRollback } from './guards'
import type { RollbackSystem } from './rollback'
import { findOwnStack, startOperation, storedPlan } from './shared'
import { refuseInvalidName } from './submission'
import type { Actor, CreateRequest, OperationResult, StackResources } from './types'

export class OperationSystem {
  constructor(private readonly options: { resources: StackResources; rollback: RollbackSystem }) {}

  async create(actor: Actor, req: CreateRequest): Promise<OperationResult> {
    const { resources } = this.options
    refuseInvalidName(req.name)
    const stackId = crypto.randomUUID()
    const checked = await checkSubmission(req, { catalog: resources.catalog, limits: resources.limits, stackName: req.name, stackId, projectId: actor.projectId })
    const templateId = crypto.randomUUID()
    const timeoutMins = req.timeoutMins ?? resources.defaultTimeoutMins
    try {
      return await startOperation(
        resources.db.pool,
        {
          stackId,
          action: 'CREATE',
          rawTemplateId: templateId,
          plan: checked.plan,
          startedBy: actor.name,
          timeoutMins,
          expectTraversalId: null,
          // The stack and its template in one statement (one round trip fewer on the way to the first node).
          before: (c) =>
            insertStackWithTemplate(
              c,
              { id: stackId, projectId: actor.projectId, name: req.name, timeoutMins, disableRollback: req.disableRollback ?? true, createdBy: actor.name, tags: req.tags ?? [] },
              { id: templateId, source: checked.source, templateText: checked.templateText, environment: checked.environmentJson, parameters: checked.parameters },
            ),
        },
        { id: stackId, name: req.name },
        'CREATE',
      )
    } catch (err) {
      if ((err as { code?: string }).code === '23505') throw new ConflictError(`a stack named ${req.name} already exists`)
      throw err
    }
  }

  async delete(actor: Actor, ref: string): Promise<OperationResult> {
    const { pool } = this.options.resources.db
    const stack = await findOwnStack(pool, actor, ref)
    if (stack.action === 'DELETE' && stack.status === 'IN_PROGRESS') {
      return { stack, traversalId: stack.currentTraversalId, action: 'DELETE', superseded: null }
    }
    const templateId = crypto.randomUUID()
    const environment = await deleteEnvironment(pool, stack.rawTemplateId)
    return startOperation(
      pool,
      {
        stackId: stack.id,
        action: 'DELETE',
        rawTemplateId: templateId,
        plan: { names: [], types: {}, dependsOn: {} },
        startedBy: actor.name,
        abortInFlight: true,
        before: (c) => insertTemplate(c, stack.id, { id: templateId, source: EMPTY_TEMPLATE_SOURCE, templateText: '{}', environment, parameters: {} }),
      },
      stack,
      'DELETE',
    )
  }

  async cancel(actor: Actor, ref: string, opts: { rollback: boolean }): Promise<OperationResult> {
    const { pool } = this.options.resources.db
    const stack = await findOwnStack(pool, actor, ref)
    refuseCancel(stack, opts)
    if (opts.rollback) return this.options.rollback.start(stack, actor.name, stack.currentTraversalId)
    const res = await stopTraversal(pool, stack.id, `Stack ${stack.action} cancelled`)
    if (!res.stopped) throw new ConflictError('the operation finished before it could be cancelled')
    return { stack, traversalId: null, action: 'CANCEL', superseded: res.traversalId }
  }

  /** Roll back to the last template that completed (or delete everything after a failed create). */
  async rollback(actor: Actor, ref: string): Promise<OperationResult> {
    const stack = await findOwnStack(this.options.resources.db.pool, actor, ref)
    refuseRollback(stack)
    return this.options.rollback.start(stack, actor.name, stack.currentTraversalId)
  }

  async check(actor: Actor, ref: string): Promise<OperationResult> {
    return this.look(actor, ref, 'CHECK')
  }

  /** A drift check: every resource's type observes its object; what each found is stored (reads.drift). */
  async drift(actor: Actor, ref: string): Promise<OperationResult> {
    return this.look(actor, ref, 'DRIFT')
  }

  /** A check or a drift check: a traversal over the rows of the stack's template that changes none of them. */
  private async look(actor: Actor, ref: string, action: 'CHECK' | 'DRIFT'): Promise<OperationResult> {
    const { pool } = this.options.resources.db
    const stack = await findOwnStack(pool, actor, ref)
    refuseLook(stack, action)
    const plan = await storedPlan(pool, stack, stack.rawTemplateId)
    return startOperation(pool, { stackId: stack.id, action, rawTemplateId: stack.rawTemplateId, plan, startedBy: actor.name, expectTraversalId: stack.currentTraversalId }, stack, action)
  }
}

/**
 * A delete's environment: the stack's hooks, so that its pre-delete hooks
 * stop the delete as Heat's do; nothing else of the environment matters to a
 * traversal of the empty template.
 */
async function deleteEnvironment(pool: Parameters<typeof templateInputs>[0], templateId: string | null): Promise<Record<string, unknown>> {
  const current = templateId ? await templateInputs(pool, templateId) : null
  const registry = (current?.environment as { resource_registry?: { resources?: Record<string, unknown> } } | null)?.resource_registry
  return registry?.resources ? { resource_registry: { resources: registry.resources } } : {}
}
