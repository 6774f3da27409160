/**
 * Which PostgreSQL to use: DATABASE_URL when set, otherwise the embedded
 * cluster under the data directory (started if it is not running).
 */
import path from 'node:path'
import { kilnConnections } from '../config'
import type { Env } from '../env'
import { startEmbeddedPostgres } from './embedded'
import { openClient } from './own-client'

export interface ResolvedDatabase {
  url: string
  embedded: boolean
  /** Stop what this call started (nothing for DATABASE_URL or a cluster that was already running). */
  release(): Promise<void>
}

export const EMBEDDED_DB_NAME = 'kiln'

/** CREATE DATABASE unless it exists (safe to race: a duplicate error is ignored). */
export async function ensureDatabase(adminUrl: string, name: string): Promise<void> {
  const client = await openClient({ connectionString: adminUrl })
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])
    if (found.rowCount === 0) {
      await client.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`).catch((err: { code?: string }) => {
        if (err.code !== '42P04' && err.code !== '23505') throw err
      })
    }
  } finally {
    await client.end()
  }
}

/**
 * The embedded server keeps Kiln's own connections for it (reserved_connections, PostgreSQL 16+; Kiln's
 * role there is a superuser, who may use them): tenants' roles holding all the server admits for them never
 * lock Kiln out. At most 250 of its 300, so that the server still starts (the tenants' budget is then
 * what it is: the worker's start-up report says so).
 */
export const embeddedReservedConnections = (e: Env): number => Math.min(250, kilnConnections(e, !e.KILN_TARGET_DATABASE_URL).ownServer)

export async function resolveDatabase(e: Env, opts: { log?: (line: string) => void } = {}): Promise<ResolvedDatabase> {
  if (e.DATABASE_URL) return { url: e.DATABASE_URL, embedded: false, release: async () => {} }
  const settings = { reserved_connections: String(embeddedReservedConnections(e)) }
  const running = await startEmbeddedPostgres({ dataDir: path.join(e.KILN_DATA_DIR, 'pg'), port: e.EMBEDDED_PG_PORT, log: opts.log, settings })
  await ensureDatabase(running.adminUrl, EMBEDDED_DB_NAME)
  return {
    url: running.databaseUrl(EMBEDDED_DB_NAME),
    embedded: true,
    release: async () => {
      if (running.startedHere) await running.stop()
    },
  }
}
