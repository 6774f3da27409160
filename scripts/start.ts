/**
 * `npm start`: everything on one machine.
 *
 *   1. PostgreSQL: DATABASE_URL, or the embedded cluster under .data/pg
 *   2. migrations (lib/db/migrate.ts: plain SQL over pg, no Prisma engine)
 *   3. the admin project and its login token (printed once, on first start)
 *   4. a production build of the UI when the sources changed
 *   5. the web server (server.ts) and WORKERS worker processes
 *
 * Children run in their own process groups, so a terminal Ctrl-C reaches only
 * this launcher, which then stops them in order: web and workers drain first,
 * the embedded database stops last. A second Ctrl-C kills them. A child that
 * crashes is restarted.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import path from 'node:path'
import { env, childEnv } from '../lib/env'
import { createLogger } from '../lib/logger'
import { resolveDatabase } from '../lib/db/bootstrap'
import { applyMigrations } from '../lib/db/migrate'
import { createDb } from '../lib/db/client'
import { bootstrapAdmin } from '../lib/auth/tokens'
import { ensureBuild } from './build-stamp'

const e = env()
const log = createLogger({ level: e.KILN_LOG_LEVEL, format: e.KILN_LOG_FORMAT }).scope({ proc: 'launcher' })

interface Child {
  name: string
  script: string
  proc: ChildProcess | null
  restarts: number[]
  /** variables of this child's own (a worker's metrics port) */
  env?: Record<string, string>
}

async function main() {
  const database = await resolveDatabase(e, { log: (l) => log.info(l) })
  let stopping = false
  const children: Child[] = []

  const stopAll = async (force: boolean) => {
    for (const c of children) {
      if (!c.proc || c.proc.exitCode !== null) continue
      try {
        process.kill(-c.proc.pid!, force ? 'SIGKILL' : 'SIGTERM')
      } catch {
        /* already gone */
      }
    }
    await Promise.all(children.map((c) => (c.proc && c.proc.exitCode === null && c.proc.signalCode === null ? new Promise((r) => c.proc!.once('exit', r)) : null)))
  }

  let signals = 0
  const onSignal = (sig: string) => {
    signals++
    if (signals === 1) {
      stopping = true
      log.info(`${sig}: stopping (web and workers drain first; press Ctrl-C again to force)`)
      void stopAll(false)
        .then(() => database.release())
        .then(() => {
          log.info('stopped')
          process.exit(0)
        })
    } else {
      log.warn(`${sig} again: killing everything`)
      void stopAll(true)
        .then(() => database.release())
        .finally(() => process.exit(1))
    }
  }
  process.on('SIGINT', () => onSignal('SIGINT'))
  process.on('SIGTERM', () => onSignal('SIGTERM'))

  try {
    const applied = await applyMigrations(database.url)
    log.info(applied.length ? `applied migrations: ${applied.join(', ')}` : 'database schema is up to date')
    const db = createDb(database.url, { max: 2 })
    const admin = await bootstrapAdmin(db, e.KILN_ADMIN_TOKEN)
    await db.close()
    await ensureBuild(log)

    const base = {
      DATABASE_URL: database.url,
      NODE_ENV: 'production',
      KILN_CHILD: '1',
      NEXT_TELEMETRY_DISABLED: '1',
    }
    const spawnChild = (c: Child) => {
      const proc = spawn(process.execPath, ['--import', 'tsx', c.script], {
        env: childEnv({ ...base, ...c.env }),
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        detached: true, // own process group: terminal signals reach only the launcher
      })
      c.proc = proc
      proc.on('exit', (code, signal) => {
        if (stopping) return
        const now = Date.now()
        c.restarts = c.restarts.filter((t) => now - t < 60_000)
        c.restarts.push(now)
        if (c.restarts.length > 5) {
          log.error(`${c.name} exited (${signal ?? code}) more than 5 times in a minute; stopping everything`)
          onSignal('crash loop')
          return
        }
        log.warn(`${c.name} exited (${signal ?? code}); restarting`)
        setTimeout(() => !stopping && spawnChild(c), 1000)
      })
      return proc
    }

    const web: Child = { name: 'web', script: 'server.ts', proc: null, restarts: [] }
    children.push(web)
    const ready = new Promise<string>((resolve, reject) => {
      const proc = spawnChild(web)
      proc.on('message', (m: { kind?: string; url?: string }) => m.kind === 'ready' && resolve(m.url ?? ''))
      proc.once('exit', () => reject(new Error('the web server exited during start-up')))
    })
    for (let i = 0; i < e.WORKERS; i++) {
      // Each worker serves its metrics on a port of its own.
      const metrics = e.KILN_WORKER_METRICS_PORT ? { KILN_WORKER_METRICS_PORT: String(e.KILN_WORKER_METRICS_PORT + i) } : undefined
      const w: Child = { name: `worker ${i + 1}`, script: path.join('worker', 'main.ts'), proc: null, restarts: [], env: metrics }
      children.push(w)
      spawnChild(w)
    }
    const url = await ready
    const lines = [
      '',
      `  Kiln is running at ${url}  (${e.WORKERS} worker${e.WORKERS === 1 ? '' : 's'}, ${database.embedded ? 'embedded PostgreSQL' : 'PostgreSQL from DATABASE_URL'})`,
      admin.createdSecret
        ? `  Log in with this admin token (shown only once; keep it safe):\n\n      ${admin.createdSecret}\n`
        : e.KILN_ADMIN_TOKEN
          ? '  Log in with the token in KILN_ADMIN_TOKEN.'
          : '  Log in with the admin token printed on first start (or set KILN_ADMIN_TOKEN).',
      '  CLI: export KILN_URL=' + url + ' KILN_TOKEN=<token>; npx kiln stack list',
      '  Press Ctrl-C to stop.',
      '',
    ]
    console.log(lines.join('\n'))
  } catch (err) {
    log.error(`start failed: ${err instanceof Error ? err.message : err}`)
    stopping = true
    await stopAll(true)
    await database.release()
    process.exit(1)
  }
}

void main()
