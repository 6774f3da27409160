/**
 * The worker process's engine room: claims jobs, runs them with bounded
 * concurrency, heartbeats, sweeps, and shuts down in two stages.
 *
 * Every wait has a reason: a NOTIFY (kiln_jobs: work was queued or a parked
 * node woken; kiln_abort: stop actions of a stack), a slot becoming free, a reconnect of the LISTEN
 * connection (jobs queued meanwhile announced themselves to nobody), or a
 * timer (heartbeat; sweep at the earliest lease expiry, deadline or end of a
 * parked node's wait; a claim
 * after `idleClaimMs` without a notification or a claim, the safety net that
 * makes a silently lost LISTEN cost seconds instead of a stall). There is no
 * blind polling loop: an idle worker costs one claim of an empty queue per
 * `idleClaimMs`.
 *
 * Slots are shared fairly between projects: a claim takes turns between the
 * projects with ready work, and no project holds more than `projectSlotCap`
 * of this worker's slots (its inline continuations included), so another
 * project's work always finds a slot. A node that waits parks and holds none.
 *
 * States: starting -> running -> draining (first SIGTERM: no new claims,
 * in-flight actions finish; aborted after shutdownAbortMs) -> stopped.
 */
import crypto from 'node:crypto'
import type { Db } from '../lib/db/client'
import { PgListener } from '../lib/db/listener'
import { claimFairly, releaseJobs } from '../lib/db/queries/queue'
import { heartbeat, nextSweepAt, pruneEvents, registerWorker, setWorkerState, sweep } from '../lib/db/queries/workers'
import { createStore } from '../lib/db/store'
import type { ClaimedJob } from '../lib/engine/ports'
import { TraversalCache } from '../lib/engine/traversal-context'
import { boundedEvaluator } from '../lib/evaluation/bounded'
import type { Logger } from '../lib/logger'
import type { ResourceType, ResourceTypeConfig } from '../lib/resources/types'
import type { StackService } from '../lib/services/stacks'
import { dispatchJob, type DispatchDeps } from './dispatch'
import { processMetrics } from '../lib/metrics/registry'
import { ActionAborts, type AbortNotice } from './signals'

export type WorkerState = 'starting' | 'running' | 'draining' | 'stopped'

/** How long the LISTEN connection may take to answer a ping before it is replaced. */
const PING_TIMEOUT_MS = 10_000
/** The reason of a claim round the idle-claim timer asked for (its log line starts with it). */
const IDLE_REASON = 'idle timer'

export interface WorkerOptions {
  db: Db
  types: { get(name: string): ResourceType | undefined }
  typeConfig: ResourceTypeConfig
  services: Pick<StackService, 'rollbackAfterFailure'>
  log: Logger
  id?: string
  concurrency: number
  /** Most of this worker's slots one project may hold (KILN_PROJECT_SLOT_SHARE of `concurrency`); default all. */
  projectSlotCap?: number
  leaseMs: number
  heartbeatMs: number
  /** Claim anyway after this long without a kiln_jobs notification or a claim (KILN_IDLE_CLAIM_MS). */
  idleClaimMs: number
  shutdownAbortMs: number
  inline: boolean
  /** State-only resource types whose steps may commit without waiting for the disk (StoreOptions.lazyTypes); default none. */
  lazyTypes?: readonly string[]
  version?: string
  /** events kept per stack; older ones are pruned once a minute */
  maxEventsPerStack?: number
}

export class WorkerRuntime {
  readonly id: string
  state: WorkerState = 'starting'
  private readonly aborts = new ActionAborts()
  private readonly inFlight = new Map<number, ClaimedJob>()
  /** Jobs in flight per project (the same jobs as inFlight). */
  private readonly perProject = new Map<string, number>()
  /**
   * The last claim left ready jobs of a project at its cap: a slot that frees
   * up claims again (those jobs announced themselves already).
   */
  private capped = false
  private readonly slots = new Set<Promise<void>>()
  private readonly deps: DispatchDeps
  private readonly log: Logger
  private listener: PgListener | null = null
  private timers = new Set<NodeJS.Timeout>()
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
  /** When this worker last heard of work (a kiln_jobs notification) or claimed: the idle-claim timer counts from here. */
  private lastHeard = Date.now()
  private lastHeartbeatOk = Date.now()
  /** Counters for logs and tests (`unannounced`: jobs only the idle-claim timer found). */
  readonly stats = { claimed: 0, finished: 0, inline: 0, swept: 0, unannounced: 0 }

  constructor(private readonly opts: WorkerOptions) {
    this.id = opts.id ?? crypto.randomUUID()
    this.log = opts.log.scope({ worker: this.id.slice(0, 8) })
    const store = createStore(opts.db.pool, {
      workerId: this.id,
      leaseMs: opts.leaseMs,
      lazyTypes: opts.lazyTypes,
      onRetry: (what, err) => this.log.warn(`retrying ${what} after: ${(err as Error).message}`),
    })
    this.deps = {
      pool: opts.db.pool,
      workerId: this.id,
      services: opts.services,
      node: {
        store,
        traversals: new TraversalCache(store, boundedEvaluator),
        evaluator: boundedEvaluator,
        types: opts.types,
        typeConfig: opts.typeConfig,
        signals: this.aborts,
        log: this.log,
        inline: opts.inline,
        // The finishing job's own slot is about to be free too.
        claimMax: (job) => Math.min(this.opts.concurrency - this.inFlight.size, this.cap - (this.perProject.get(job.projectId) ?? 0)) + 1,
      },
    }
  }

  async start(): Promise<void> {
    await registerWorker(this.opts.db.pool, this.id, this.opts.concurrency, this.opts.version ?? '')
    await this.listen()
    this.state = 'running'
    this.every(this.opts.heartbeatMs, () => this.beat())
    this.scheduleSweep(0)
    this.scheduleIdleClaim(this.opts.idleClaimMs)
    const keep = this.opts.maxEventsPerStack
    if (keep) {
      // Timer reason: the event history limit is enforced once a minute, not on every write.
      this.every(60_000, async () => {
        const n = await pruneEvents(this.opts.db.pool, keep)
        if (n) this.log.info(`pruned ${n} event(s) beyond ${keep} per stack`)
      })
    }
    this.log.info(`running (concurrency ${this.opts.concurrency}, lease ${this.opts.leaseMs} ms)`)
    this.wake('start')
  }

  /** Graceful stop: no new work, in-flight actions finish (aborted after shutdownAbortMs). */
  async stop(): Promise<void> {
    if (this.state === 'stopped' || this.state === 'draining') return this.drained()
    this.state = 'draining'
    this.log.info(`draining ${this.inFlight.size} in-flight job(s)`)
    await setWorkerState(this.opts.db.pool, this.id, 'draining').catch(() => {})
    const abortTimer = setTimeout(() => {
      const n = this.aborts.abortAll('worker shutting down')
      if (n) this.log.warn(`aborted ${n} action(s) still running after ${this.opts.shutdownAbortMs} ms`)
    }, this.opts.shutdownAbortMs)
    await this.drained()
    clearTimeout(abortTimer)
    await releaseJobs(this.opts.db.pool, this.id, []).catch(() => {})
    await setWorkerState(this.opts.db.pool, this.id, 'stopped').catch(() => {})
    for (const t of this.timers) clearTimeout(t)
    this.timers.clear()
    await this.listener?.close()
    this.listener = null
    this.state = 'stopped'
    this.log.info(`stopped (${this.stats.finished} jobs run, ${this.stats.inline} without a queue hop, ${this.stats.unannounced} found only by the idle-claim timer)`)
  }

  private get cap(): number {
    return Math.max(1, Math.min(this.opts.projectSlotCap ?? this.opts.concurrency, this.opts.concurrency))
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

  /** A method, so TypeScript does not narrow `state` across awaits. */
  private stopped(): boolean {
    return this.state === 'stopped'
  }

  private async drained() {
    while (this.slots.size) await Promise.allSettled([...this.slots])
  }

  private every(ms: number, fn: () => Promise<void>) {
    const tick = () => {
      const t = setTimeout(async () => {
        this.timers.delete(t)
        if (this.state === 'stopped') return
        await fn().catch((err) => this.log.warn(`timer: ${(err as Error).message}`))
        if (!this.stopped()) tick()
      }, ms)
      this.timers.add(t)
    }
    tick()
  }

  private async beat() {
    const rows = [...this.inFlight.values()].map((j) => j.resourceId).filter((r): r is number => r !== null)
    try {
      const n = await heartbeat(this.opts.db.pool, this.id, this.opts.leaseMs, rows)
      this.lastHeartbeatOk = Date.now()
      if (n < 0) this.log.error('this worker was declared stopped; its locks may have been broken')
    } catch (err) {
      const silent = Date.now() - this.lastHeartbeatOk
      this.log.warn(`heartbeat failed (${silent} ms without one): ${(err as Error).message}`)
      // Our leases are about to run out: another worker will break our locks and
      // re-run those nodes, so stop acting on them now rather than race it.
      if (silent > this.opts.leaseMs * 0.8) {
        const n = this.aborts.abortAll('lost contact with the database; the lease is expiring')
        if (n) this.log.error(`aborted ${n} action(s): lease about to expire`)
      }
    }
  }

  private scheduleSweep(delayMs: number) {
    const t = setTimeout(async () => {
      this.timers.delete(t)
      if (this.state === 'stopped') return
      let next = this.opts.leaseMs
      try {
        const report = await sweep(this.opts.db.pool, this.opts.leaseMs)
        const m = processMetrics('worker')
        m.leaseBreaks.inc(report.broken)
        m.sweeperActions.inc({ action: 'broken' }, report.broken)
        m.sweeperActions.inc({ action: 'requeued' }, report.requeued)
        m.sweeperActions.inc({ action: 'released' }, report.released)
        m.sweeperActions.inc({ action: 'timed_out' }, report.timedOut)
        m.sweeperActions.inc({ action: 'woken' }, report.woken)
        if (report.broken || report.requeued || report.released || report.timedOut) {
          this.stats.swept++
          this.log.warn('sweeper repaired stacks', { ...report })
          this.wake('sweeper')
        }
        const at = await nextSweepAt(this.opts.db.pool)
        if (at) next = Math.min(next, Math.max(50, at.getTime() - Date.now() + 20))
      } catch (err) {
        this.log.warn(`sweep failed: ${(err as Error).message}`)
        next = 1000
      }
      // Jitter so that several workers do not sweep in step.
      if (!this.stopped()) this.scheduleSweep(next + Math.floor(Math.random() * 200))
    }, delayMs)
    this.timers.add(t)
  }

  private async listen(): Promise<void> {
    this.listener = await PgListener.open({
      url: this.opts.db.url,
      channels: ['kiln_jobs', 'kiln_abort'],
      application: 'kiln-worker-listen',
      label: 'worker',
      log: this.log,
      onNotification: (msg) => {
        if (msg.channel === 'kiln_jobs') {
          this.lastHeard = Date.now()
          this.wake('notify')
          // A new traversal: load its context now, beside the claim (errors are the cache's to forget).
          if (msg.payload && this.state === 'running') void this.deps.node.traversals.get(msg.payload).catch(() => {})
        } else if (msg.channel === 'kiln_abort' && msg.payload) {
          try {
            const n = this.aborts.notice(JSON.parse(msg.payload) as AbortNotice)
            if (n) this.log.info(`aborted ${n} action(s): ${msg.payload}`)
          } catch {
            /* malformed notice: ignore */
          }
        }
      },
      // Jobs queued while nobody listened sent their NOTIFY into the void.
      onReconnect: () => this.wake('LISTEN connection back'),
    })
  }

  /**
   * The safety net under NOTIFY: after `idleClaimMs` without a kiln_jobs
   * notification or a claim, claim anyway. Re-armed for what is left of the
   * period when something was heard meanwhile, so a notification costs no
   * timer call. A claim it makes that finds jobs means a notification was
   * lost: it is logged, and the LISTEN connection is asked whether it still
   * answers (a half-open connection never reports its own death).
   */
  private scheduleIdleClaim(delayMs: number) {
    const t = setTimeout(() => {
      this.timers.delete(t)
      if (this.stopped()) return
      const quiet = Date.now() - this.lastHeard
      let next = this.opts.idleClaimMs - quiet
      if (next <= 0) {
        next = this.opts.idleClaimMs
        // While the LISTEN connection is known to be down, its return wakes a claim (onReconnect).
        if (this.listener?.listening) {
          this.lastHeard = Date.now()
          this.wake(`${IDLE_REASON}: no notification or claim for ${quiet} ms`)
        }
      }
      this.scheduleIdleClaim(next)
    }, delayMs)
    this.timers.add(t)
  }

  /** Ask for a claim round (coalesced). */
  wake(reason: string) {
    if (this.state !== 'running') return
    // The first reason since the last round, except that any other reason replaces the idle timer's.
    if (!this.wanted || this.wantedFor.startsWith(IDLE_REASON)) this.wantedFor = reason
    this.wanted = true
    if (!this.pumping) void this.pump()
  }

  private async pump() {
    this.pumping = true
    try {
      while (this.wanted && this.state === 'running') {
        const free = this.opts.concurrency - this.inFlight.size
        if (free <= 0) break
        this.wanted = false
        const reason = this.wantedFor
        this.lastHeard = Date.now()
        const { jobs, capped } = await claimFairly(this.opts.db.pool, this.id, free, this.opts.leaseMs, this.opts.lazyTypes, { cap: this.cap, used: this.perProject })
        this.capped = capped
        this.stats.claimed += jobs.length
        if (jobs.length && reason.startsWith(IDLE_REASON)) this.unannounced(jobs.length, reason)
        for (const job of jobs) this.runSlot(job)
        if (jobs.length === free) {
          this.wanted = true
          this.wantedFor = 'the last claim filled every free slot'
        }
      }
    } catch (err) {
      if (!this.listener?.listening) {
        // The database is unreachable: the LISTEN connection's return wakes a claim, rather than a retry every second.
        this.log.warn(`claim failed: ${(err as Error).message}; claiming again when the LISTEN connection is back`)
        return
      }
      this.log.warn(`claim failed: ${(err as Error).message}; retrying in 1 s`)
      const t = setTimeout(() => {
        this.timers.delete(t)
        this.wake('claim retry')
      }, 1000)
      this.timers.add(t)
    } finally {
      this.pumping = false
    }
  }

  /** A claim of the idle-claim timer found jobs: their notifications were lost (or are still on the way). */
  private unannounced(n: number, reason: string) {
    this.stats.unannounced += n
    this.log.warn(`claimed ${n} job(s) on the ${reason}; checking that the LISTEN connection still answers`)
    void this.listener?.check(PING_TIMEOUT_MS)
  }

  private runSlot(first: ClaimedJob) {
    this.track(first)
    const slot = (async () => {
      let job: ClaimedJob | null = first
      while (job) {
        let next: ClaimedJob[] = []
        try {
          const res = await dispatchJob(this.deps, job)
          processMetrics('worker').nodeSteps.inc({ outcome: res.outcome })
          next = res.next
          if (res.outcome === 'gone') await this.releaseOrphans()
        } catch (err) {
          processMetrics('worker').nodeSteps.inc({ outcome: 'error' })
          this.log.error(`job ${job.id} failed unexpectedly: ${(err as Error).stack ?? err}`)
          this.untrack(job)
          await this.releaseOrphans()
        }
        this.untrack(job)
        this.stats.finished++
        if (next.length && this.state !== 'running') {
          // Draining: hand the successors to another worker instead of starting them here.
          for (const j of next) j.headStart?.abort('the worker is shutting down')
          await releaseJobs(this.opts.db.pool, this.id, [...this.inFlight.keys()]).catch(() => {})
          next = []
        }
        this.stats.inline += next.length
        // The first continues in this slot; any more (a fan-out) get slots of their own.
        const [head, ...rest] = next
        if (head) this.track(head)
        for (const j of rest) this.runSlot(j)
        job = head ?? null
      }
    })()
    this.slots.add(slot)
    void slot.finally(() => {
      this.slots.delete(slot)
      if (this.wanted) this.wake('slot free')
      else if (this.capped) this.wake('a slot freed up while a project at its cap has ready work')
    })
  }

  /** After an ambiguous failure, give back any job we claimed but are not running. */
  private async releaseOrphans() {
    await releaseJobs(this.opts.db.pool, this.id, [...this.inFlight.keys()]).catch(() => {})
  }
}
