/**
 * A migrated embedded PostgreSQL of one's own, in a temporary directory
 * removed on stop: for suites that restart the server (chaos) or run long
 * (`npm run overlap`, `npm run load`) without touching the shared test cluster.
 */
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { startEmbeddedPostgres, type RunningPostgres } from '../../lib/db/embedded'
import { applyMigrations } from '../../lib/db/migrate'

export interface OwnPostgres {
  url: string
  /** The server's log (pg_ctl -l). */
  logFile: string
  /** Stop the server (`crash`: immediate, no flush), wait `pauseMs`, start it again on the same port (clients see it go away). */
  restart(pauseMs: number, opts?: { crash?: boolean }): Promise<void>
  /** Stop the server until `up()`: for a test that holds it down until something happened (a gate, not a timer). */
  down(opts?: { crash?: boolean }): Promise<void>
  up(): Promise<void>
  stop(): Promise<void>
}

const portFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const srv = net.createServer()
    srv.once('error', () => resolve(false))
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)))
  })

/**
 * A random free port below the kernel's ephemeral range and outside the embedded clusters'
 * 55440-55539 scan: while a restart keeps the server down, a cluster that another test run
 * starts takes the first free port of that scan, and would take this one.
 */
async function quietPort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000)
    if (await portFree(port)) return port
  }
}

/** `settings`: server settings (`-c name=value`), e.g. `log_statement: 'all'`. */
export async function ownPostgres(prefix: string, opts: { settings?: Record<string, string> } = {}): Promise<OwnPostgres> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `kiln-${prefix}-`))
  fs.chmodSync(dir, 0o755) // when run as root, PostgreSQL runs as the postgres user, who must enter it
  const dataDir = path.join(dir, 'pg')
  let server: RunningPostgres = await startEmbeddedPostgres({ dataDir, port: await quietPort(), settings: opts.settings })
  const url = server.databaseUrl('postgres')
  await applyMigrations(url)
  const down = (opts?: { crash?: boolean }) => server.stop(opts?.crash ? 'immediate' : 'fast')
  const up = async () => {
    server = await startEmbeddedPostgres({ dataDir, port: server.port, settings: opts.settings })
  }
  return {
    url,
    logFile: path.join(dir, 'pg.log'),
    async restart(pauseMs, o) {
      await down(o)
      await new Promise((r) => setTimeout(r, pauseMs))
      await up()
    },
    down,
    up,
    async stop() {
      await server.stop().catch(() => {})
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}
