/**
 * What the parts of a worker (worker/runtime.ts) share: its id, the
 * database, its log, its settings, its state, its timers, the signals of its
 * in-flight actions, the store and traversal cache its nodes run against, and
 * its counters. Built once per worker; each part takes it whole.
 */
import type { Db } from '../lib/db/client'
import type { ConvergenceStore } from '../lib/engine/ports'
import type { TraversalCache } from '../lib/engine/traversal-context'
import type { Logger } from '../lib/logger'
import type { ActionAborts } from './signals'
import type { Timers } from './timers'

export type WorkerState = 'starting' | 'running' | 'draining' | 'stopped'

export interface WorkerSettings {
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

/** starting -> running -> draining (no new claims; in-flight actions finish) -> stopped. */
export class Lifecycle {
  state: WorkerState = 'starting'

  /** Methods, so TypeScript does not narrow `state` across awaits. */
  running(): boolean {
    return this.state === 'running'
  }

  stopped(): boolean {
    return this.state === 'stopped'
  }
}

/** Counters for logs and tests (`unannounced`: jobs only the idle-claim timer found). */
export interface WorkerStats {
  claimed: number
  finished: number
  inline: number
  swept: number
  unannounced: number
}

export interface WorkerResources {
  id: string
  db: Db
  /** Scoped to this worker. */
  log: Logger
  settings: WorkerSettings
  lifecycle: Lifecycle
  timers: Timers
  aborts: ActionAborts
  store: ConvergenceStore
  traversals: TraversalCache
  stats: WorkerStats
}
