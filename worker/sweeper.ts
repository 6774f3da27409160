/**
 * The sweeper: repairs what dead or slow workers left (expired leases broken,
 * lost jobs re-queued, deadlines timed out, parked nodes whose wait is over
 * woken; docs/design/locks-and-leases.md). It sweeps at the earliest lease
 * expiry, deadline or end of a parked node's wait, at least once a lease,
 * and claims when it repaired something.
 */
import { nextSweepAt, sweep } from '../lib/db/queries/workers'
import { processMetrics } from '../lib/metrics/registry'
import type { WorkerResources } from './resources'

export class Sweeper {
  constructor(
    private readonly resources: WorkerResources,
    /** Ask for a claim round, with the reason. */
    private readonly wake: (reason: string) => void,
  ) {}

  start(): void {
    this.schedule(0)
  }

  private schedule(delayMs: number) {
    const { timers, lifecycle } = this.resources
    timers.after(delayMs, async () => {
      const next = await this.sweepOnce()
      // Jitter so that several workers do not sweep in step.
      if (!lifecycle.stopped()) this.schedule(next + Math.floor(Math.random() * 200))
    })
  }

  /** One sweep; returns when the next is due. */
  private async sweepOnce(): Promise<number> {
    const { db, settings, stats, log } = this.resources
    let next = settings.leaseMs
    try {
      const report = await sweep(db.pool, settings.leaseMs)
      const m = processMetrics('worker')
      m.leaseBreaks.inc(report.broken)
      m.sweeperActions.inc({ action: 'broken' }, report.broken)
      m.sweeperActions.inc({ action: 'requeued' }, report.requeued)
      m.sweeperActions.inc({ action: 'released' }, report.released)
      m.sweeperActions.inc({ action: 'timed_out' }, report.timedOut)
      m.sweeperActions.inc({ action: 'woken' }, report.woken)
      if (report.broken || report.requeued || report.released || report.timedOut) {
        stats.swept++
        log.warn('sweeper repaired stacks', { ...report })
        this.wake('sweeper')
      }
      const at = await nextSweepAt(db.pool)
      if (at) next = Math.min(next, Math.max(50, at.getTime() - Date.now() + 20))
    } catch (err) {
      log.warn(`sweep failed: ${(err as Error).message}`)
      next = 1000
    }
    return next
  }
}
