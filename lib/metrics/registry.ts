/**
 * Prometheus metrics (prom-client). Each process (web server, worker) has one
 * registry; the counters and histograms below are created in every process
 * and filled by the code that sees the event (a worker's node steps, the web
 * server's requests). What only the database knows (traversals running, the
 * queue, live workers) is read when the web server is scraped: one query per
 * scrape instead of a poll loop.
 *
 * Names follow Prometheus conventions: `kiln_` prefix, base units (seconds),
 * `_total` for counters.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'

export interface DatabaseGauges {
  traversalsRunning: number
  queueDepth: number
  oldestReadyJobSeconds: number
  /** Nodes parked: waiting (for a signal, a timer) without a worker slot. */
  parkedNodes: number
  liveWorkers: number
}

export function createMetrics(process: 'web' | 'worker') {
  const registry = new Registry()
  registry.setDefaultLabels({ process })
  collectDefaultMetrics({ register: registry, prefix: 'kiln_process_' })

  const nodeSteps = new Counter({
    name: 'kiln_node_steps_total',
    help: 'Graph nodes run by this worker, by outcome (created, updated, unchanged, replaced, deleted, failed, blocked, stale, …; error: the step itself failed).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  })
  const leaseBreaks = new Counter({
    name: 'kiln_lease_breaks_total',
    help: 'Locks whose lease ran out (their worker stopped heartbeating) broken by this worker’s sweeper.',
    registers: [registry],
  })
  const sweeperActions = new Counter({
    name: 'kiln_sweeper_actions_total',
    help: 'What this worker’s sweeper repaired, by action (broken: lock broken; requeued: ready node without a job; released: job of a dead worker; timed_out: traversal past its deadline).',
    labelNames: ['action'] as const,
    registers: [registry],
  })
  const eventDeliveryLag = new Histogram({
    name: 'kiln_event_delivery_lag_seconds',
    help: 'From an event’s commit (its database timestamp) to its emission to the stack’s sockets by this web server.',
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  })
  const apiLatency = new Histogram({
    name: 'kiln_api_request_duration_seconds',
    help: 'API request duration by route pattern, method and status class.',
    labelNames: ['route', 'method', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  })

  return { registry, nodeSteps, leaseBreaks, sweeperActions, eventDeliveryLag, apiLatency }
}

export type Metrics = ReturnType<typeof createMetrics>

let current: Metrics | undefined
/**
 * This process's metrics, made on first use. One registry per process: the
 * web server's API and event bridge, or a worker's runtime, fill it from where
 * they see the event, without passing it down through every constructor.
 */
export function processMetrics(kind: 'web' | 'worker' = 'web'): Metrics {
  current ??= createMetrics(kind)
  return current
}

/**
 * Gauges read from the database at each scrape (`read` runs one query). A
 * failed read leaves the gauges out of that scrape rather than failing it:
 * the process metrics still tell whether the web server itself is alive.
 */
const withGauges = new WeakSet<Metrics>()

export function addDatabaseGauges(metrics: Metrics, read: () => Promise<DatabaseGauges>) {
  // Once per registry: a process that serves several APIs (the tests) reads the first one's database.
  if (withGauges.has(metrics)) return
  withGauges.add(metrics)
  let pending: Promise<DatabaseGauges | null> | null = null
  // One query serves the four gauges of a scrape.
  const current = () => (pending ??= read().then((v) => v, () => null).finally(() => setTimeout(() => (pending = null), 0)))
  const gauge = (name: string, help: string, pick: (g: DatabaseGauges) => number) =>
    new Gauge({
      name,
      help,
      registers: [metrics.registry],
      async collect() {
        const g = await current()
        if (g) this.set(pick(g))
      },
    })
  gauge('kiln_traversals_running', 'Traversals not yet ended, across all stacks.', (g) => g.traversalsRunning)
  gauge('kiln_queue_depth', 'Jobs queued and not claimed.', (g) => g.queueDepth)
  gauge('kiln_queue_oldest_ready_seconds', 'Age of the oldest job that is due and not claimed (0 when none).', (g) => g.oldestReadyJobSeconds)
  gauge('kiln_parked_nodes', 'Nodes waiting (for a signal, a timer) without a worker slot.', (g) => g.parkedNodes)
  gauge('kiln_workers_live', 'Workers whose heartbeat is within the lease.', (g) => g.liveWorkers)
}
