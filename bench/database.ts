/**
 * The database a benchmark runs on: DATABASE_URL's (which the benchmark empties),
 * or a dedicated embedded cluster under the data directory, migrated. `stop`
 * stops the cluster if this process started it.
 */
import path from 'node:path'
import { ensureDatabase } from '../lib/db/bootstrap'
import { startEmbeddedPostgres } from '../lib/db/embedded'
import { applyMigrations } from '../lib/db/migrate'
import type { Env } from '../lib/env'

export async function benchDatabase(e: Env, cluster: { dir: string; database: string; settings?: Record<string, string> }): Promise<{ url: string; stop: () => Promise<void> }> {
  let url = e.DATABASE_URL
  let stop = async () => {}
  if (!url) {
    const pg = await startEmbeddedPostgres({ dataDir: path.join(e.KILN_DATA_DIR, cluster.dir), ...(cluster.settings ? { settings: cluster.settings } : {}) })
    await ensureDatabase(pg.adminUrl, cluster.database)
    url = pg.databaseUrl(cluster.database)
    stop = async () => {
      if (pg.startedHere) await pg.stop()
    }
  }
  await applyMigrations(url)
  return { url, stop }
}
