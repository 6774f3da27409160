/** What the health checks ask the database: that it answers, its version, the migrations applied. */
import type pg from 'pg'

export async function ping(pool: pg.Pool): Promise<void> {
  await pool.query('SELECT 1')
}

/** The server's version (`server_version`). */
export async function serverVersion(pool: pg.Pool): Promise<string> {
  const { rows } = await pool.query(`SELECT current_setting('server_version') AS v`)
  return String(rows[0].v)
}

/** The migrations that finished and were not rolled back, by name. */
export async function appliedMigrations(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query(`SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL ORDER BY migration_name`)
  return rows.map((r) => String(r.migration_name))
}
