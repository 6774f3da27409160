/**
 * Finishes of one worker, gathered per stack: while two finish calls for a
 * stack are in flight, further finishes for it wait and then go as one
 * kiln_finish_nodes call (one transaction, one commit, one turn at the stack's
 * event lock). A lone finish goes at once, as a plain kiln_finish_node: a
 * chain pays nothing for this; ten nodes that end together pay two round
 * trips instead of ten commits queued on each other's sync points.
 */
import type pg from 'pg'
import type { ClaimedJob, FinishRequest, FinishResult } from '../engine/ports'
import { finishNode, finishNodes } from './queries/node'

/** Calls in flight per stack before finishes are gathered. */
const IN_FLIGHT = 2
/** Finishes per kiln_finish_nodes call. */
const MAX_BATCH = 32

interface Pending {
  job: ClaimedJob
  req: FinishRequest
  resolve(r: FinishResult): void
  reject(err: unknown): void
}

export type Retry = <T>(what: string, fn: () => Promise<T>) => Promise<T>

export class FinishBatcher {
  private readonly waiting = new Map<string, Pending[]>()
  private readonly inFlight = new Map<string, number>()

  constructor(
    private readonly pool: pg.Pool,
    private readonly workerId: string,
    private readonly leaseMs: number,
    private readonly retry: Retry,
    /** The worker's state-only resource types (lazy commits; finishBody). */
    private readonly lazyTypes: readonly string[] = [],
  ) {}

  finish(job: ClaimedJob, req: FinishRequest): Promise<FinishResult> {
    return new Promise((resolve, reject) => {
      const queue = this.waiting.get(job.stackId) ?? []
      queue.push({ job, req, resolve, reject })
      this.waiting.set(job.stackId, queue)
      this.pump(job.stackId)
    })
  }

  private pump(stackId: string) {
    const queue = this.waiting.get(stackId)
    while (queue?.length && (this.inFlight.get(stackId) ?? 0) < IN_FLIGHT) {
      const batch = queue.splice(0, MAX_BATCH)
      if (!queue.length) this.waiting.delete(stackId)
      this.inFlight.set(stackId, (this.inFlight.get(stackId) ?? 0) + 1)
      void this.send(batch).finally(() => {
        const n = (this.inFlight.get(stackId) ?? 1) - 1
        if (n) this.inFlight.set(stackId, n)
        else this.inFlight.delete(stackId)
        this.pump(stackId)
      })
    }
  }

  private async send(batch: Pending[]): Promise<void> {
    if (batch.length === 1) return this.sendOne(batch[0]!)
    try {
      // Safe to retry as a whole: a finish whose first attempt committed answers 'gone'.
      const results = await this.retry('finish', () => finishNodes(this.pool, this.workerId, batch, this.leaseMs, this.lazyTypes))
      batch.forEach((p, i) => p.resolve(results[i]!))
    } catch {
      // One finish the database refuses must not fail the others with it: each on its own.
      await Promise.all(batch.map((p) => this.sendOne(p)))
    }
  }

  private async sendOne(p: Pending): Promise<void> {
    try {
      p.resolve(await this.retry('finish', () => finishNode(this.pool, this.workerId, p.job, p.req, this.leaseMs, this.lazyTypes)))
    } catch (err) {
      p.reject(err)
    }
  }
}
