/**
 * Health: `liveness` for anyone (GET /api/health: up or down), `health` for
 * admins (GET /api/health/details: the database, the migrations, the live
 * workers with their hosts and pids).
 */
import type { Db } from '../db/client'
import { listMigrations } from '../db/migrate'

export interface Health {
  status: 'ok' | 'degraded' | 'down'
  time: string
  database: { ok: boolean; latencyMs: number | null; server: string | null; error?: string }
  migrations: { applied: number; latest: string | null; pending: string[] }
  workers: { live: number; list: { id: string; hostname: string; pid: number; state: string; concurrency: number; heartbeatAt: string }[] }
}

export async function health(db: Db, leaseMs: number): Promise<Health> {
  const time = new Date().toISOString()
  const started = Date.now()
  try {
    const { rows } = await db.pool.query(`SELECT current_setting('server_version') AS v`)
    const latencyMs = Date.now() - started
    const applied = await db.pool.query(`SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL ORDER BY migration_name`)
    const names = applied.rows.map((r) => String(r.migration_name))
    const pending = listMigrations().filter((m) => !names.includes(m))
    const workers = await db.pool.query(
      `SELECT id, hostname, pid, state, concurrency, heartbeat_at FROM worker
        WHERE stopped_at IS NULL AND heartbeat_at > now() - $1 * interval '1 millisecond' ORDER BY started_at`,
      [leaseMs],
    )
    const list = workers.rows.map((w) => ({ id: w.id, hostname: w.hostname, pid: w.pid, state: w.state, concurrency: w.concurrency, heartbeatAt: new Date(w.heartbeat_at).toISOString() }))
    return {
      status: pending.length || list.length === 0 ? 'degraded' : 'ok',
      time,
      database: { ok: true, latencyMs, server: `PostgreSQL ${rows[0].v}` },
      migrations: { applied: names.length, latest: names.at(-1) ?? null, pending },
      workers: { live: list.length, list },
    }
  } catch (err) {
    return {
      status: 'down',
      time,
      database: { ok: false, latencyMs: null, server: null, error: (err as Error).message },
      migrations: { applied: 0, latest: null, pending: [] },
      workers: { live: 0, list: [] },
    }
  }
}

/** Up when the database answers; nothing else (the public health check). */
export async function liveness(db: Db): Promise<'up' | 'down'> {
  try {
    await db.pool.query('SELECT 1')
    return 'up'
  } catch {
    return 'down'
  }
}
