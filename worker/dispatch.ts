/**
 * Running one claimed job, whatever its kind. Shared by the worker process
 * (worker/slots.ts) and the deterministic scenario harness (test/scenarios),
 * so both exercise the same code.
 */
import type { Db } from '../lib/db/client'
import { runNode, type NodeResult, type NodeRunnerDeps } from '../lib/engine/check-resource'
import type { ClaimedJob } from '../lib/engine/ports'
import { completeJob } from '../lib/db/queries/queue'
import type { FailureRollback } from '../lib/services/stacks/rollback'

export interface DispatchDeps {
  node: NodeRunnerDeps
  /** Starts the rollback a failed traversal asks for (a `rollback` job): all a worker needs of the stack operations. */
  rollback: FailureRollback
  pool: Db['pool']
  workerId: string
}

export async function dispatchJob(deps: DispatchDeps, job: ClaimedJob): Promise<NodeResult> {
  switch (job.kind) {
    case 'check_resource':
      return runNode(deps.node, job)
    case 'rollback': {
      // Idempotent: if the worker dies after starting the rollback, the re-run finds the stack moved on.
      const started = await deps.rollback.afterFailure(job.stackId, job.traversalId!)
      await completeJob(deps.pool, deps.workerId, job.id)
      deps.node.log.info(started ? `rollback started (traversal ${started.traversalId})` : 'rollback not needed: the stack moved on', { stack: job.stackId })
      return { outcome: 'unchanged', next: [] }
    }
    default:
      await completeJob(deps.pool, deps.workerId, job.id)
      deps.node.log.warn(`dropped a job of unknown kind ${String(job.kind)}`)
      return { outcome: 'gone', next: [] }
  }
}
