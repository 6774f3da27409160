/**
 * The worker's timers, each with a purpose (a heartbeat, a sweep, the idle
 * claim, a claim retry, pruning events): none fires once the worker has
 * stopped, and stopping clears every one still pending.
 */
import type { Logger } from '../lib/logger'

export class Timers {
  private readonly pending = new Set<NodeJS.Timeout>()

  constructor(
    /** Whether the worker has stopped (read when a timer fires). */
    private readonly stopped: () => boolean,
    private readonly log: Logger,
  ) {}

  /** Run `fn` once after `ms`, unless the worker has stopped by then. */
  after(ms: number, fn: () => unknown): void {
    const t = setTimeout(() => {
      this.pending.delete(t)
      if (this.stopped()) return
      void fn()
    }, ms)
    this.pending.add(t)
  }

  /** Run `fn` every `ms`, counted from the end of its last run, until the worker stops; a failure is logged. */
  every(ms: number, fn: () => Promise<void>): void {
    this.after(ms, async () => {
      await fn().catch((err) => this.log.warn(`timer: ${(err as Error).message}`))
      if (!this.stopped()) this.every(ms, fn)
    })
  }

  clear(): void {
    for (const t of this.pending) clearTimeout(t)
    this.pending.clear()
  }
}
