/**
 * A migrated embedded PostgreSQL of one's own, in a temporary directory
 * removed on stop: for suites that restart the server (chaos) or run long
 * (`npm run overlap`, `npm run load`) without touching the shared test cluster.
 */
import fs from 'node:fs'
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
  stop(): Promise<void>
}

/** `settings`: server settings (`-c name=value`), e.g. `log_statement: 'all'`. */
export async function ownPostgres(prefix: string, opts: { settings?: Record<string, string> } = {}): Promise<OwnPostgres> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `kiln-${prefix}-`))
  fs.chmodSync(dir, 0o755) // when run as root, PostgreSQL runs as the postgres user, who must enter it
  const dataDir = path.join(dir, 'pg')
  let server: RunningPostgres = await startEmbeddedPostgres({ dataDir, settings: opts.settings })
  const url = server.databaseUrl('postgres')
  await applyMigrations(url)
  return {
    url,
    logFile: path.join(dir, 'pg.log'),
    async restart(pauseMs, o) {
      await server.stop(o?.crash ? 'immediate' : 'fast')
      await new Promise((r) => setTimeout(r, pauseMs))
      server = await startEmbeddedPostgres({ dataDir, port: server.port, settings: opts.settings })
    },
    async stop() {
      await server.stop().catch(() => {})
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}
