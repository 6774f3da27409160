/**
 * The heartbeat: every `heartbeatMs` the worker row says it is alive and the
 * rows its jobs hold get their leases extended. A worker that cannot reach
 * the database for most of a lease stops its actions before another worker
 * breaks its locks and re-runs those nodes.
 */
import { heartbeat } from '../lib/db/queries/workers'
import type { WorkerResources } from './resources'

export class Heartbeat {
  private lastOk = Date.now()

  constructor(
    private readonly resources: WorkerResources,
    /** The rows the jobs in flight hold. */
    private readonly heldRows: () => number[],
  ) {}

  start(): void {
    this.resources.timers.every(this.resources.settings.heartbeatMs, () => this.beat())
  }

  private async beat() {
    const { db, id, settings, log, aborts } = this.resources
    try {
      const n = await heartbeat(db.pool, id, settings.leaseMs, this.heldRows())
      this.lastOk = Date.now()
      if (n < 0) log.error('this worker was declared stopped; its locks may have been broken')
    } catch (err) {
      const silent = Date.now() - this.lastOk
      log.warn(`heartbeat failed (${silent} ms without one): ${(err as Error).message}`)
      // Our leases are about to run out: another worker will break our locks and
      // re-run those nodes, so stop acting on them now rather than race it.
      if (silent > settings.leaseMs * 0.8) {
        const n = aborts.abortAll('lost contact with the database; the lease is expiring')
        if (n) log.error(`aborted ${n} action(s): lease about to expire`)
      }
    }
  }
}
