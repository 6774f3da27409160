/**
 * A worker of the test's own process: a worker row, the real store and the
 * real engine (runNode), so a test can place a death, a slow call or a
 * recorded action exactly between two engine steps. Jobs are claimed from
 * the real queue one at a time (`claim`), as a worker process claims them.
 *
 *   const w = await inProcessWorker(c, { inline: true })
 *   const res = await runNode(w.deps, await w.claim())
 */
import crypto from 'node:crypto'
import { expect } from 'vitest'
import { claimAndBeginJobs } from '../../lib/db/queries/queue'
import { registerWorker } from '../../lib/db/queries/workers'
import { createStore } from '../../lib/db/store'
import type { NodeRunnerDeps } from '../../lib/engine/check-resource'
import type { ClaimedJob, ConvergenceStore } from '../../lib/engine/ports'
import { TraversalCache } from '../../lib/engine/traversal-context'
import { boundedEvaluator } from '../../lib/evaluation/bounded'
import { silentLogger } from '../../lib/logger'
import { builtinTypes, createRegistry } from '../../lib/resources/registry'
import type { TestCluster } from './cluster'

/** Long enough that no lease runs out during a test unless the test expires it. */
export const IN_PROCESS_LEASE_MS = 60_000

export interface InProcessWorkerOptions {
  /** Calls of the store replaced (the real store is passed along as `real`). */
  store?: (real: ConvergenceStore) => Partial<ConvergenceStore>
  /** The resource types (default: the built-in registry). */
  types?: NodeRunnerDeps['types']
  /** Continue with the successors a finish begins (as a worker process does); default false. */
  inline?: boolean
}

export async function inProcessWorker(c: TestCluster, opts: InProcessWorkerOptions = {}) {
  const id = crypto.randomUUID()
  await registerWorker(c.db.pool, id, 4, 'test')
  const store = createStore(c.db.pool, { workerId: id, leaseMs: IN_PROCESS_LEASE_MS })
  const deps: NodeRunnerDeps = {
    store: { ...store, ...opts.store?.(store) },
    traversals: new TraversalCache(store, boundedEvaluator),
    evaluator: boundedEvaluator,
    types: opts.types ?? createRegistry(builtinTypes()),
    typeConfig: { workspaceDir: c.workspace },
    signals: { open: () => ({ signal: new AbortController().signal, close() {} }) },
    log: silentLogger,
    inline: opts.inline ?? false,
  }
  /** Claim (and begin) up to `max` queued jobs (none if the queue is empty). */
  const claimQueued = (max: number) => claimAndBeginJobs(c.db.pool, id, max, IN_PROCESS_LEASE_MS, [])
  /** Claim (and begin) the one job the test expects to be queued. */
  const claim = async (): Promise<ClaimedJob> => {
    const jobs = await claimQueued(1)
    expect(jobs).toHaveLength(1)
    return jobs[0]!
  }
  return { id, deps, claim, claimQueued }
}
