/**
 * Claiming jobs: a claim round is asked for (wake) with a reason, coalesced
 * while one runs, and served while slots are free. A claim takes turns
 * between the projects with ready work and keeps each within its cap
 * (lib/db/queries/queue.ts, claimFairly).
 */
import { claimFairly } from '../lib/db/queries/queue'
import type { WorkerResources } from './resources'
import type { Slots } from './slots'

/** The reason of a claim round the idle-claim timer asked for (its log line starts with it). */
export const IDLE_REASON = 'idle timer'

/** What the claim loop needs of the LISTEN connection (worker/listener.ts). */
export interface NotificationChannel {
  /** Whether the connection is up (else its return wakes a claim). */
  readonly listening: boolean
  /** The worker heard of work or claimed: the idle-claim timer counts from now. */
  heard(): void
  /** Ask the connection whether it still answers: a notification was lost. */
  checkConnection(): void
}

export class ClaimLoop {
  private pumping = false
  /**
   * A claim round is asked for and not yet served. It stays set while every
   * slot is busy (a NOTIFY came then, or the last claim filled them all), and
   * the next slot to free up serves it. Otherwise a freed slot claims nothing,
   * since every job queued since the last claim came with its own NOTIFY
   * (the sweeper's re-queues too): in a graph whose nodes wait for two
   * inputs, half the finishes end their slot, and a claim after each found
   * nothing while adding a round trip to every burst of finishes.
   */
  private wanted = false
  /** Why the claim round asked for (and not yet served) was asked for: the first reason since the last round. */
  private wantedFor = ''
  /**
   * The last claim left ready jobs of a project at its cap: a slot that frees
   * up claims again (those jobs announced themselves already).
   */
  private capped = false

  constructor(private readonly resources: WorkerResources, private readonly options: { slots: Slots; channel: NotificationChannel }) {}

  /** Ask for a claim round (coalesced). */
  wake(reason: string): void {
    if (!this.resources.lifecycle.running()) return
    // The first reason since the last round, except that any other reason replaces the idle timer's.
    if (!this.wanted || this.wantedFor.startsWith(IDLE_REASON)) this.wantedFor = reason
    this.wanted = true
    if (!this.pumping) void this.pump()
  }

  /** A slot ended: serve a round asked for while every slot was busy, or claim for a project held back by its cap. */
  slotFreed(): void {
    if (this.wanted) this.wake('slot free')
    else if (this.capped) this.wake('a slot freed up while a project at its cap has ready work')
  }

  private async pump() {
    const { resources } = this
    const { slots, channel } = this.options
    const { db, id, settings, stats } = resources
    this.pumping = true
    try {
      while (this.wanted && resources.lifecycle.running()) {
        const free = slots.free
        if (free <= 0) break
        this.wanted = false
        const reason = this.wantedFor
        channel.heard()
        const { jobs, capped } = await claimFairly(db.pool, id, free, settings.leaseMs, settings.lazyTypes, { cap: slots.cap, used: slots.used })
        this.capped = capped
        stats.claimed += jobs.length
        if (jobs.length && reason.startsWith(IDLE_REASON)) this.unannounced(jobs.length, reason)
        for (const job of jobs) slots.run(job)
        if (jobs.length === free) {
          this.wanted = true
          this.wantedFor = 'the last claim filled every free slot'
        }
      }
    } catch (err) {
      this.failed(err)
    } finally {
      this.pumping = false
    }
  }

  /** A claim failed: claim again when the database answers. */
  private failed(err: unknown) {
    const { log, timers } = this.resources
    if (!this.options.channel.listening) {
      // The database is unreachable: the LISTEN connection's return wakes a claim, rather than a retry every second.
      log.warn(`claim failed: ${(err as Error).message}; claiming again when the LISTEN connection is back`)
      return
    }
    log.warn(`claim failed: ${(err as Error).message}; retrying in 1 s`)
    timers.after(1000, () => this.wake('claim retry'))
  }

  /** A claim of the idle-claim timer found jobs: their notifications were lost (or are still on the way). */
  private unannounced(n: number, reason: string) {
    this.resources.stats.unannounced += n
    this.resources.log.warn(`claimed ${n} job(s) on the ${reason}; checking that the LISTEN connection still answers`)
    this.options.channel.checkConnection()
  }
}
