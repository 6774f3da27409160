/**
 * Steps of one worker, gathered per stack: while two calls of a kind for a
 * stack are in flight, further ones for it wait and then go as one batch call
 * (one transaction, one commit, one turn at the stack's event lock). A lone
 * step goes at once, as a plain single call: a chain pays nothing for this;
 * ten nodes that end together pay two round trips instead of ten commits
 * queued on each other's sync points and on the event lock.
 *
 * Two kinds are gathered (lib/db/store.ts): finishes (kiln_finish_node / kiln_finish_nodes) and
 * replace calls (kiln_replace_node / kiln_replace_nodes: a replace-all's first
 * layer sends ten at once).
 */
import type { ClaimedJob } from '../engine/ports'

/** Calls in flight per stack before steps are gathered. */
const IN_FLIGHT = 2
/** Steps per batch call. */
const MAX_BATCH = 32

interface Pending<Req, Res> {
  job: ClaimedJob
  req: Req
  resolve(r: Res): void
  reject(err: unknown): void
}

export type Retry = <T>(what: string, fn: () => Promise<T>) => Promise<T>

/**
 * `one` (the single call) and `many` (the batch call, results in the order of
 * its items) must be safe to retry: a step whose first attempt committed
 * answers 'gone' (its job is gone), so a batch is retried as a whole.
 */
export class StepBatcher<Req, Res> {
  private readonly waiting = new Map<string, Pending<Req, Res>[]>()
  private readonly inFlight = new Map<string, number>()

  constructor(
    private readonly what: string,
    private readonly retry: Retry,
    private readonly one: (job: ClaimedJob, req: Req) => Promise<Res>,
    private readonly many: (items: { job: ClaimedJob; req: Req }[]) => Promise<Res[]>,
  ) {}

  submit(job: ClaimedJob, req: Req): Promise<Res> {
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

  private async send(batch: Pending<Req, Res>[]): Promise<void> {
    if (batch.length === 1) return this.sendOne(batch[0]!)
    try {
      const results = await this.retry(this.what, () => this.many(batch))
      batch.forEach((p, i) => p.resolve(results[i]!))
    } catch {
      // One step the database refuses must not fail the others with it: each on its own.
      await Promise.all(batch.map((p) => this.sendOne(p)))
    }
  }

  private async sendOne(p: Pending<Req, Res>): Promise<void> {
    try {
      p.resolve(await this.retry(this.what, () => this.one(p.job, p.req)))
    } catch (err) {
      p.reject(err)
    }
  }
}
