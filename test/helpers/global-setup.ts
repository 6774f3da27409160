/**
 * Vitest global setup: one PostgreSQL for the whole run (TEST_DATABASE_URL, or
 * an embedded cluster under .data/test-pg), and a template database migrated
 * once. Each test file clones it (see db.ts), so files never share state.
 */
import path from 'node:path'
import pg from 'pg'
import type { TestProject } from 'vitest/node'
import { parseEnv } from '../../lib/env'
import { startEmbeddedPostgres, type RunningPostgres } from '../../lib/db/embedded'
import { applyMigrations } from '../../lib/db/migrate'

/** Databases are named kiln_t_<unix seconds>_<random> so that concurrent runs on one
 *  server never touch each other's, and leftovers of killed runs are dropped later. */
const RUN_STAMP = Math.floor(Date.now() / 1000)
export const TEMPLATE_DB = `kiln_t_${RUN_STAMP}_template`
const STALE_AFTER_S = 6 * 3600

declare module 'vitest' {
  export interface ProvidedContext {
    adminUrl: string
    templateDb: string
    runStamp: number
  }
}

let embedded: RunningPostgres | undefined

function withDatabase(url: string, db: string) {
  const u = new URL(url)
  u.pathname = '/' + db
  return u.toString()
}

export default async function setup(project: TestProject) {
  const e = parseEnv()
  let adminUrl: string
  if (e.TEST_DATABASE_URL) adminUrl = withDatabase(e.TEST_DATABASE_URL, 'postgres')
  else {
    embedded = await startEmbeddedPostgres({ dataDir: path.join(e.KILN_DATA_DIR, 'test-pg') })
    adminUrl = embedded.adminUrl
  }
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  try {
    // Leftovers of runs that were killed long ago.
    const all = await admin.query(`SELECT datname FROM pg_database WHERE datname LIKE 'kiln\\_t\\_%'`)
    for (const { datname } of all.rows as { datname: string }[]) {
      const stamp = Number(datname.split('_')[2])
      if (stamp && stamp < RUN_STAMP - STALE_AFTER_S) await admin.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`)
    }
    await admin.query(`CREATE DATABASE "${TEMPLATE_DB}"`)
  } finally {
    await admin.end()
  }
  await applyMigrations(withDatabase(adminUrl, TEMPLATE_DB))
  project.provide('adminUrl', adminUrl)
  project.provide('templateDb', TEMPLATE_DB)
  project.provide('runStamp', RUN_STAMP)
  return async () => {
    const c = new pg.Client({ connectionString: adminUrl })
    await c.connect()
    await c.query(`DROP DATABASE IF EXISTS "${TEMPLATE_DB}" WITH (FORCE)`).catch(() => {})
    await c.end()
    if (embedded?.startedHere) await embedded.stop()
  }
}
