/**
 * The worker process's engine room: claims jobs, runs them with bounded
 * concurrency, heartbeats, sweeps, and shuts down in two stages. Each of
 * these is a small part sharing one set of resources (worker/resources.ts):
 * the claim loop (claim-loop.ts), the slots jobs run in (slots.ts), the
 * LISTEN connection and the idle-claim timer under it (listener.ts), the
 * heartbeat (heartbeat.ts), the sweeper (sweeper.ts) and event pruning
 * (pruner.ts). This class builds them and runs the worker's states.
 *
 * Every wait has a reason: a NOTIFY (kiln_jobs: work was queued or a parked
 * node woken; kiln_abort: stop actions of a stack), a slot becoming free, a
 * reconnect of the LISTEN connection (jobs queued meanwhile announced
 * themselves to nobody), or a timer (heartbeat; sweep at the earliest lease
 * expiry, deadline or end of a parked node's wait; a claim after
 * `idleClaimMs` without a notification or a claim, the safety net that makes
 * a silently lost LISTEN cost seconds instead of a stall). There is no blind
 * polling loop: an idle worker costs one claim of an empty queue per
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
import { releaseJobs } from '../lib/db/queries/queue'
import { registerWorker, setWorkerState } from '../lib/db/queries/workers'
import { createStore } from '../lib/db/store'
import { TraversalCache } from '../lib/engine/traversal-context'
import type { TemplateEvaluator } from '../lib/engine/ports'
import { boundedEvaluator } from '../lib/evaluation/bounded'
import type { Logger } from '../lib/logger'
import type { ResourceType, ResourceTypeConfig } from '../lib/resources/types'
import type { FailureRollback } from '../lib/services/stacks/rollback'
import { ClaimLoop } from './claim-loop'
import type { DispatchDeps } from './dispatch'
import { Heartbeat } from './heartbeat'
import { JobListener } from './listener'
import { EventPruner } from './pruner'
import { Lifecycle, type WorkerResources, type WorkerSettings, type WorkerState, type WorkerStats } from './resources'
import { ActionAborts } from './signals'
import { Slots } from './slots'
import { Sweeper } from './sweeper'
import { Timers } from './timers'

export type { WorkerState }

export interface WorkerOptions extends WorkerSettings {
  db: Db
  types: { get(name: string): ResourceType | undefined }
  /**
   * Called with a traversal's resource types when it is loaded, before any of its nodes runs: a
   * provider's types are made current then (one query), so a type registered or changed a moment
   * ago is known. Absent: the types never change.
   */
  ensureTypes?: (names: string[]) => Promise<void>
  typeConfig: ResourceTypeConfig
  /** Starts the rollback a failed traversal asks for. */
  rollback: FailureRollback
  log: Logger
  id?: string
}

export class WorkerRuntime {
  readonly id: string
  /** Counters for logs and tests (`unannounced`: jobs only the idle-claim timer found). */
  readonly stats: WorkerStats = { claimed: 0, finished: 0, inline: 0, swept: 0, unannounced: 0 }
  private readonly resources: WorkerResources
  private readonly slots: Slots
  private readonly listener: JobListener
  private readonly claims: ClaimLoop
  private readonly heartbeat: Heartbeat
  private readonly sweeper: Sweeper
  private readonly pruner: EventPruner

  constructor(opts: WorkerOptions) {
    this.id = opts.id ?? crypto.randomUUID()
    this.resources = workerResources(this.id, opts, this.stats)
    const wake = (reason: string) => this.claims.wake(reason)
    this.slots = new Slots(this.resources, { dispatch: this.dispatchDeps(opts), freed: () => this.claims.slotFreed() })
    this.listener = new JobListener(this.resources, wake)
    this.claims = new ClaimLoop(this.resources, { slots: this.slots, channel: this.listener })
    this.heartbeat = new Heartbeat(this.resources, () => this.slots.heldRows())
    this.sweeper = new Sweeper(this.resources, wake)
    this.pruner = new EventPruner(this.resources)
  }

  get state(): WorkerState {
    return this.resources.lifecycle.state
  }

  async start(): Promise<void> {
    const { db, id, settings, lifecycle, log } = this.resources
    await registerWorker(db.pool, id, settings.concurrency, settings.version ?? '')
    await this.listener.open()
    lifecycle.state = 'running'
    this.heartbeat.start()
    this.sweeper.start()
    this.listener.startIdleClaims()
    this.pruner.start()
    log.info(`running (concurrency ${settings.concurrency}, lease ${settings.leaseMs} ms)`)
    this.wake('start')
  }

  /** Graceful stop: no new work, in-flight actions finish (aborted after shutdownAbortMs). */
  async stop(): Promise<void> {
    const { db, id, settings, lifecycle, log, aborts, timers, stats } = this.resources
    if (lifecycle.state === 'stopped' || lifecycle.state === 'draining') return this.slots.drained()
    lifecycle.state = 'draining'
    log.info(`draining ${this.slots.size} in-flight job(s)`)
    await setWorkerState(db.pool, id, 'draining').catch(() => {})
    const abortTimer = setTimeout(() => {
      const n = aborts.abortAll('worker shutting down')
      if (n) log.warn(`aborted ${n} action(s) still running after ${settings.shutdownAbortMs} ms`)
    }, settings.shutdownAbortMs)
    await this.slots.drained()
    clearTimeout(abortTimer)
    await releaseJobs(db.pool, id, []).catch(() => {})
    await setWorkerState(db.pool, id, 'stopped').catch(() => {})
    timers.clear()
    await this.listener.close()
    lifecycle.state = 'stopped'
    log.info(`stopped (${stats.finished} jobs run, ${stats.inline} without a queue hop, ${stats.unannounced} found only by the idle-claim timer)`)
  }

  /** Ask for a claim round (coalesced). */
  wake(reason: string): void {
    this.claims.wake(reason)
  }

  /** What a job runs with: the node runner's ports, and the rollback a failed traversal asks for. */
  private dispatchDeps(opts: WorkerOptions): DispatchDeps {
    const { store, traversals, aborts, log, id } = this.resources
    return {
      pool: opts.db.pool,
      workerId: id,
      rollback: opts.rollback,
      node: {
        store,
        traversals,
        evaluator: boundedEvaluator,
        types: opts.types,
        typeConfig: opts.typeConfig,
        signals: aborts,
        log,
        inline: opts.inline,
        claimMax: (job) => this.slots.claimMax(job),
      },
    }
  }
}

/** The resources a worker's parts share. */
function workerResources(id: string, opts: WorkerOptions, stats: WorkerStats): WorkerResources {
  const log = opts.log.scope({ worker: id.slice(0, 8) })
  const lifecycle = new Lifecycle()
  const store = createStore(opts.db.pool, {
    workerId: id,
    leaseMs: opts.leaseMs,
    lazyTypes: opts.lazyTypes,
    onRetry: (what, err) => log.warn(`retrying ${what} after: ${(err as Error).message}`),
  })
  return {
    id,
    db: opts.db,
    log,
    settings: opts,
    lifecycle,
    timers: new Timers(() => lifecycle.stopped(), log),
    aborts: new ActionAborts(),
    store,
    traversals: new TraversalCache(store, withTypes(opts.ensureTypes)),
    stats,
  }
}

/** The evaluator whose definitions come with their types made current (WorkerOptions.ensureTypes). */
function withTypes(ensure: WorkerOptions['ensureTypes']): Pick<TemplateEvaluator, 'definitionOf'> {
  if (!ensure) return boundedEvaluator
  return {
    async definitionOf(stored) {
      const definition = await boundedEvaluator.definitionOf(stored)
      await ensure(Object.values(definition.resources).map((r) => r.type))
      return definition
    },
  }
}
