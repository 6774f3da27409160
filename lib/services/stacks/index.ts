/**
 * Stack operations: the one path from the API, the UI, the CLI and the worker
 * to the data. Each starts a traversal (lib/db/queries/traversal.ts) in one
 * transaction; nothing waits for the traversal to finish.
 *
 *   create · update (also while IN_PROGRESS: supersedes) · cancel (with or
 *   without rollback) · delete (also while IN_PROGRESS: aborts in-flight
 *   actions) · rollback · check · drift (a check of every object against what
 *   was stored) · rollbackAfterFailure (worker)
 *
 * The service is composed of small systems sharing one set of resources
 * (StackResources): the operations (operations.ts, updates.ts), the guards
 * that decide whether one may start (guards.ts), and the rollback
 * (rollback.ts), which a worker uses on its own.
 */
import { GuardSystem } from './guards'
import { OperationSystem } from './operations'
import { RollbackSystem } from './rollback'
import { findOwnStack } from './shared'
import type { Actor, StackResources } from './types'
import { UpdateSystem } from './updates'

export { submissionFrom } from './submission'
export type { Actor, CreateRequest, OperationResult, ServiceDeps, StackRecord, StackResources, UpdateRequest } from './types'

export function createStackService(resources: StackResources) {
  const rollback = new RollbackSystem(resources)
  const guards = new GuardSystem(resources)
  const operations = new OperationSystem({ resources, rollback })
  const updates = new UpdateSystem({ resources, guards })
  return {
    /** A stack of the actor's project by id or name. Other projects' stacks are "not found" (never revealed). */
    find: (actor: Actor, ref: string, opts: { includeDeleted?: boolean } = {}) => findOwnStack(resources.db.pool, actor, ref, opts),
    create: operations.create.bind(operations),
    update: updates.update.bind(updates),
    preview: updates.preview.bind(updates),
    cancel: operations.cancel.bind(operations),
    delete: operations.delete.bind(operations),
    rollback: operations.rollback.bind(operations),
    check: operations.check.bind(operations),
    drift: operations.drift.bind(operations),
    rollbackAfterFailure: rollback.afterFailure.bind(rollback),
  }
}

export type StackService = ReturnType<typeof createStackService>
