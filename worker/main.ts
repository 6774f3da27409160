/**
 * `npm run worker`: one worker process. Against DATABASE_URL (or the embedded
 * cluster when it is unset). Migrations are applied first (idempotent, and
 * serialised by Prisma's advisory lock), so a worker may start on its own.
 *
 * Signals: the first SIGTERM/SIGINT drains (no new work; in-flight actions
 * finish, aborted after KILN_SHUTDOWN_ABORT_MS); a second one exits at once.
 * Started by `npm start`, it also drains when its launcher goes away.
 */
import { env } from '../lib/env'
import { createLogger } from '../lib/logger'
import { resolveDatabase } from '../lib/db/bootstrap'
import { createDb } from '../lib/db/client'
import { applyMigrations } from '../lib/db/migrate'
import { limitsFrom, typeConfigFrom } from '../lib/config'
import { builtinTypes, createRegistry, stateOnlyTypeNames, typeCatalog } from '../lib/resources/registry'
import { createStackService } from '../lib/services/stacks'
import { WorkerRuntime } from './runtime'

async function main() {
  const e = env()
  const log = createLogger({ level: e.KILN_LOG_LEVEL, format: e.KILN_LOG_FORMAT })
  const database = await resolveDatabase(e, { log: (l) => log.info(l) })
  await applyMigrations(database.url)
  // At most 8 database calls at once per worker, however many actions run: actions hold no
  // connection, and more concurrent engine steps only queue inside PostgreSQL on the stack's
  // event-number lock (bench, layered-10000 create: 32.6 s with 20 connections, 20.7 s with 8).
  const db = createDb(database.url, { max: Math.min(8, e.KILN_WORKER_CONCURRENCY + 4), application: 'kiln-worker', warm: true })
  await db.ready
  const registry = createRegistry(builtinTypes())
  const services = createStackService({ db, catalog: typeCatalog(registry), types: registry, limits: limitsFrom(e), defaultTimeoutMins: e.KILN_DEFAULT_TIMEOUT_MINS })
  const worker = new WorkerRuntime({
    db,
    types: registry,
    typeConfig: typeConfigFrom(e, database.url),
    services,
    log,
    concurrency: e.KILN_WORKER_CONCURRENCY,
    leaseMs: e.KILN_LEASE_MS,
    heartbeatMs: e.heartbeatMs,
    shutdownAbortMs: e.KILN_SHUTDOWN_ABORT_MS,
    inline: e.KILN_INLINE_CONTINUATION,
    lazyTypes: e.KILN_LAZY_COMMITS ? stateOnlyTypeNames(registry) : [],
    maxEventsPerStack: e.KILN_MAX_EVENTS_PER_STACK,
  })

  let signals = 0
  const shutdown = (why: string) => {
    signals++
    if (signals > 1) {
      log.warn(`${why} again: exiting now`)
      process.exit(1)
    }
    log.info(`${why}: draining (send it again to exit at once)`)
    void worker
      .stop()
      .then(() => db.close())
      .then(() => database.release())
      .then(() => process.exit(0), () => process.exit(1))
  }
  process.on('SIGTERM', () => shutdown('SIGTERM'))
  process.on('SIGINT', () => shutdown('SIGINT'))
  process.on('disconnect', () => shutdown('launcher went away'))
  await worker.start()
  process.send?.({ kind: 'ready', worker: worker.id })
}

main().catch((err) => {
  console.error(`worker failed to start: ${err instanceof Error ? err.stack : err}`)
  process.exit(1)
})
