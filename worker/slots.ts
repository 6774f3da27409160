/**
 * The jobs this worker runs and the slots they run in: at most `concurrency`
 * at once, and at most the project cap for one project (its inline
 * continuations included), so another project's work always finds a slot. A
 * finished job's first successor continues in its slot and any more (a
 * fan-out) get slots of their own; while the worker drains, successors go
 * back to the queue for another worker.
 */
import { releaseJobs } from '../lib/db/queries/queue'
import type { ClaimedJob } from '../lib/engine/ports'
import { processMetrics } from '../lib/metrics/registry'
import { dispatchJob, type DispatchDeps } from './dispatch'
import type { WorkerResources } from './resources'

export class Slots {
  private readonly inFlight = new Map<number, ClaimedJob>()
  /** Jobs in flight per project (the same jobs as inFlight). */
  private readonly perProject = new Map<string, number>()
  private readonly slots = new Set<Promise<void>>()

  constructor(
    private readonly resources: WorkerResources,
    private readonly options: {
      dispatch: DispatchDeps
      /** A slot ended: the claim loop may claim for it. */
      freed: () => void
    },
  ) {}

  get size(): number {
    return this.inFlight.size
  }

  get free(): number {
    return this.resources.settings.concurrency - this.inFlight.size
  }

  /** Most of this worker's slots one project may hold. */
  get cap(): number {
    const { projectSlotCap, concurrency } = this.resources.settings
    return Math.max(1, Math.min(projectSlotCap ?? concurrency, concurrency))
  }

  /** Jobs in flight per project, for a claim that keeps each project within its cap. */
  get used(): ReadonlyMap<string, number> {
    return this.perProject
  }

  /** How many successors a finishing job may claim to run here: the finishing job's own slot is about to be free too. */
  claimMax(job: ClaimedJob): number {
    return Math.min(this.free, this.cap - (this.perProject.get(job.projectId) ?? 0)) + 1
  }

  /** The rows the jobs in flight hold (the heartbeat extends their leases). */
  heldRows(): number[] {
    return [...this.inFlight.values()].map((j) => j.resourceId).filter((r): r is number => r !== null)
  }

  async drained(): Promise<void> {
    while (this.slots.size) await Promise.allSettled([...this.slots])
  }

  /** Run `first`, then the successors it begins, in a slot of its own. */
  run(first: ClaimedJob): void {
    this.track(first)
    const slot = (async () => {
      let job: ClaimedJob | null = first
      while (job) {
        const [head, ...rest] = await this.step(job)
        // The first continues in this slot; any more (a fan-out) get slots of their own.
        if (head) this.track(head)
        for (const j of rest) this.run(j)
        job = head ?? null
      }
    })()
    this.slots.add(slot)
    void slot.finally(() => {
      this.slots.delete(slot)
      this.options.freed()
    })
  }

  /** Run one job; returns the successors to run next in this worker. */
  private async step(job: ClaimedJob): Promise<ClaimedJob[]> {
    const { resources } = this
    let next: ClaimedJob[] = []
    try {
      const res = await dispatchJob(this.options.dispatch, job)
      processMetrics('worker').nodeSteps.inc({ outcome: res.outcome })
      next = res.next
      if (res.outcome === 'gone') await this.releaseOrphans()
    } catch (err) {
      processMetrics('worker').nodeSteps.inc({ outcome: 'error' })
      resources.log.error(`job ${job.id} failed unexpectedly: ${(err as Error).stack ?? err}`)
      this.untrack(job)
      await this.releaseOrphans()
    }
    this.untrack(job)
    resources.stats.finished++
    if (next.length && !resources.lifecycle.running()) {
      // Draining: hand the successors to another worker instead of starting them here.
      for (const j of next) j.headStart?.abort('the worker is shutting down')
      await this.releaseOrphans()
      next = []
    }
    resources.stats.inline += next.length
    return next
  }

  private track(job: ClaimedJob) {
    this.inFlight.set(job.id, job)
    this.perProject.set(job.projectId, (this.perProject.get(job.projectId) ?? 0) + 1)
  }

  private untrack(job: ClaimedJob) {
    if (!this.inFlight.delete(job.id)) return
    const n = (this.perProject.get(job.projectId) ?? 1) - 1
    if (n > 0) this.perProject.set(job.projectId, n)
    else this.perProject.delete(job.projectId)
  }

  /** After an ambiguous failure (or while draining), give back any job we claimed but are not running. */
  private async releaseOrphans() {
    await releaseJobs(this.resources.db.pool, this.resources.id, [...this.inFlight.keys()]).catch(() => {})
  }
}
