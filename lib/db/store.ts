/** The PostgreSQL implementation of the engine's ConvergenceStore, for one worker. */
import type pg from 'pg'
import type { ConvergenceStore, FinishRequest, FinishResult, ReplaceRequest, ReplaceResult } from '../engine/ports'
import { withRetry } from './retry'
import { StepBatcher } from './step-batcher'
import { beginNode, finishNode, finishNodes, markAdopting, markInProgress, parkNode, recordHook, recordIntent, replaceNode, replaceNodes, reportProgress } from './queries/node'
import { outsideObjectStore } from './queries/outside-objects'
import { recordDrift } from './queries/drift'
import { loadTraversal } from './queries/traversal'
import { clearSignals, listSignals, readSignals } from './queries/signals'

export interface StoreOptions {
  workerId: string
  leaseMs: number
  /**
   * Resource types whose actions change nothing outside the database: a step
   * touching only rows of these commits without waiting for the disk
   * (kiln_commit_lazily in lib/db/functions/05_commit_lazily.sql). Empty: every step waits.
   */
  lazyTypes?: readonly string[]
  /** Called when a call is retried after a transient error (lost connection, deadlock). */
  onRetry?: (what: string, err: unknown) => void
}

/**
 * Every call is one transaction and safe to retry: a retry of a call whose
 * first attempt committed finds its job gone and answers 'gone'. Finishes, and
 * replace calls, that are ready at the same moment share a transaction
 * (lib/db/step-batcher.ts).
 */
export function createStore(pool: pg.Pool, opts: StoreOptions): ConvergenceStore {
  const retry = <T>(what: string, fn: () => Promise<T>) => withRetry(fn, { onRetry: (err) => opts.onRetry?.(what, err) })
  const { workerId, leaseMs, lazyTypes } = opts
  const finishes = new StepBatcher<FinishRequest, FinishResult>(
    'finish', retry,
    (job, req) => finishNode(pool, workerId, job, req, leaseMs, lazyTypes),
    (items) => finishNodes(pool, workerId, items, leaseMs, lazyTypes),
  )
  const replaces = new StepBatcher<ReplaceRequest, ReplaceResult>(
    'replace', retry,
    (job, req) => replaceNode(pool, workerId, job, req, leaseMs, lazyTypes),
    (items) => replaceNodes(pool, workerId, items, leaseMs, lazyTypes),
  )
  return {
    beginNode: (job) => retry('begin', () => beginNode(pool, workerId, leaseMs, job)),
    finishNode: (job, req) => finishes.submit(job, req),
    replaceNode: (job, req) => replaces.submit(job, req),
    parkNode: (job, req) => retry('park', () => parkNode(pool, workerId, job, req)),
    markInProgress: (job, action) => retry('mark', () => markInProgress(pool, workerId, job, action, lazyTypes)),
    recordIntent: (job, properties, requires) => retry('intent', () => recordIntent(pool, workerId, job, properties, requires)),
    recordHook: (job, hook, reason) => retry('hook', () => recordHook(pool, workerId, job, hook, reason)),
    reportProgress: (job, message, fraction) => reportProgress(pool, workerId, job, message, fraction).catch(() => {}),
    markAdopting: (job, externalId) => retry('adopt', () => markAdopting(pool, workerId, job, externalId)),
    recordDrift: (job, record) => retry('drift', () => recordDrift(pool, job.traversalId!, record)),
    loadTraversal: (id) => retry('load', () => loadTraversal(pool, id)),
    objects: outsideObjectStore(pool, retry),
    signals: {
      read: (stackId, handle) => readSignals(pool, stackId, handle),
      list: (stackId, handle) => listSignals(pool, stackId, handle),
      clear: (stackId, handle) => clearSignals(pool, stackId, handle),
    },
  }
}
