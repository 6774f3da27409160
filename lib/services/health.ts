/**
 * Health: `liveness` for anyone (GET /api/health: up or down), `health` for
 * admins (GET /api/health/details: the database, the migrations, the live
 * workers with their hosts and pids).
 */
import type { Db } from '../db/client'
import { listMigrations } from '../db/migrate'
import { appliedMigrations, ping, serverVersion } from '../db/queries/health'
import { liveWorkers } from '../db/queries/workers'

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
    const version = await serverVersion(db.pool)
    const latencyMs = Date.now() - started
    const names = await appliedMigrations(db.pool)
    const pending = listMigrations().filter((m) => !names.includes(m))
    const list = (await liveWorkers(db.pool, leaseMs)).map((w) => ({ ...w, heartbeatAt: w.heartbeatAt.toISOString() }))
    return {
      status: pending.length || list.length === 0 ? 'degraded' : 'ok',
      time,
      database: { ok: true, latencyMs, server: `PostgreSQL ${version}` },
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
    await ping(db.pool)
    return 'up'
  } catch {
    return 'down'
  }
}
