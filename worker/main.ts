/**
 * `npm run worker`: one worker process. Against DATABASE_URL (or the embedded
 * cluster when it is unset). Migrations are applied first (idempotent, and
 * serialised by an advisory lock), so a worker may start on its own.
 * A database that cannot be reached yet is waited for (STARTUP_WAIT_MS).
 *
 * Signals: the first SIGTERM/SIGINT drains (no new work; in-flight actions
 * finish, aborted after KILN_SHUTDOWN_ABORT_MS); a second one exits at once.
 * Started by `npm start`, it also drains when its launcher goes away.
 */
import { env } from '../lib/env'
import { createLogger } from '../lib/logger'
import { resolveDatabase } from '../lib/db/bootstrap'
import { createDb, type Db } from '../lib/db/client'
import { withRetry } from '../lib/db/retry'
import { applyMigrations } from '../lib/db/migrate'
import { restrictDatabaseAccess } from '../lib/db/access'
import { builtinOptionsFrom, targetIsOwnServer, typeConfigFrom, workerPoolSize } from '../lib/config'
import { targetCapacityReport } from '../lib/resources/builtin/postgres-capacity'
import { builtinTypes, createRegistry, stateOnlyTypeNames, withProviders } from '../lib/resources/registry'
import { ProviderTypes } from '../lib/resources/provider/provider-types'
import { loadTypePackages } from '../lib/resources/packages'
import { providerSource } from '../lib/db/queries/providers'
import { RollbackSystem } from '../lib/services/stacks/rollback'
import { WorkerRuntime } from './runtime'
import { processMetrics } from '../lib/metrics/registry'
import { serveMetrics } from '../lib/metrics/serve'
import { configureEvaluation } from '../lib/evaluation/pool'
import { evaluationSettingsFrom } from '../lib/evaluation/settings'

/**
 * How long a starting worker waits for its database (a restart, or a worker
 * started before PostgreSQL is up) before it gives up. Without it a worker
 * spawned while the database restarts exits at once, and `npm start`, which
 * restarts a worker at most five times a minute, would stop everything.
 */
const STARTUP_WAIT_MS = 300_000

async function main() {
  const e = env()
  const log = createLogger({ level: e.KILN_LOG_LEVEL, format: e.KILN_LOG_FORMAT })
  // Budgets for tenants' templates; the evaluation threads start only if an evaluation needs them.
  configureEvaluation(evaluationSettingsFrom(e))
  const database = await resolveDatabase(e, { log: (l) => log.info(l) })
  const builtin = createRegistry(builtinTypes({ ...builtinOptionsFrom(e), packages: await loadTypePackages(e.KILN_TYPE_PACKAGES) }))
  let running: { db: Db; worker: WorkerRuntime } | null = null

  let signals = 0
  const shutdown = (why: string) => {
    signals++
    if (signals > 1 || !running) {
      log.warn(`${why}${running ? ' again' : ' while starting'}: exiting now`)
      process.exit(running ? 1 : 0)
    }
    log.info(`${why}: draining (send it again to exit at once)`)
    const { db, worker } = running
    void worker
      .stop()
      .then(() => db.close())
      .then(() => database.release())
      .then(() => process.exit(0), () => process.exit(1))
  }
  process.on('SIGTERM', () => shutdown('SIGTERM'))
  process.on('SIGINT', () => shutdown('SIGINT'))
  process.on('disconnect', () => shutdown('launcher went away'))

  const startOnce = async () => {
    await applyMigrations(database.url)
    // Tenant logins (Kiln::Postgres::Database) must not reach Kiln's own database.
    const advice = await restrictDatabaseAccess(database.url)
    if (advice) log.warn(advice)
    // What tenants' databases may take of the target server, and what an operator should change.
    const typeConfig = typeConfigFrom(e, database.url)
    const capacity = await targetCapacityReport(typeConfig, { ownServer: targetIsOwnServer(e, database.url) })
    if (capacity.info) log.info(capacity.info)
    for (const w of capacity.warnings) log.warn(w)
    const db = createDb(database.url, { max: workerPoolSize(e), application: 'kiln-worker', warm: true })
    try {
      await db.ready
      // Providers' types: loaded now, made current when a traversal that uses one is loaded.
      const providerTypes = new ProviderTypes(providerSource(db.pool), { publicUrl: typeConfig.publicUrl, timeoutMs: e.KILN_PROVIDER_TIMEOUT_MS })
      await providerTypes.reload()
      const registry = withProviders(builtin, providerTypes)
      const worker = new WorkerRuntime({
        db,
        types: registry,
        ensureTypes: async (names) => {
          if (names.some((n) => !builtin.has(n))) await providerTypes.sync()
        },
        typeConfig,
        // Of the stack operations, a worker starts only the rollback after a failed traversal.
        rollback: new RollbackSystem({ db }),
        log,
        concurrency: e.KILN_WORKER_CONCURRENCY,
        projectSlotCap: e.projectSlotCap,
        leaseMs: e.KILN_LEASE_MS,
        heartbeatMs: e.heartbeatMs,
        idleClaimMs: e.KILN_IDLE_CLAIM_MS,
        shutdownAbortMs: e.KILN_SHUTDOWN_ABORT_MS,
        inline: e.KILN_INLINE_CONTINUATION,
        lazyTypes: e.KILN_LAZY_COMMITS ? stateOnlyTypeNames(builtin) : [],
        maxEventsPerStack: e.KILN_MAX_EVENTS_PER_STACK,
      })
      await worker.start()
      return { db, worker }
    } catch (err) {
      await db.close()
      throw err
    }
  }

  running = await withRetry(startOnce, {
    maxMs: STARTUP_WAIT_MS,
    minDelayMs: 200,
    maxDelayMs: 5000,
    onRetry: (err, _attempt, delay) => log.warn(`database not reachable yet (${(err as Error).message}); retrying in ${delay} ms`),
  })
  if (e.KILN_WORKER_METRICS_PORT) {
    const served = await serveMetrics(processMetrics('worker').registry, e.KILN_WORKER_METRICS_PORT, e.HOST)
    log.info(`metrics on http://${e.HOST}:${served.port}/metrics`)
  }
  process.send?.({ kind: 'ready', worker: running.worker.id })
}

main().catch((err) => {
  console.error(`worker failed to start: ${err instanceof Error ? err.stack : err}`)
  process.exit(1)
})
