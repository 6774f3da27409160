/** The database-wide gauges of GET /metrics, in one statement. */
import type pg from 'pg'
import type { DatabaseGauges } from '../../metrics/registry'

export async function readDatabaseGauges(pool: pg.Pool, leaseMs: number): Promise<DatabaseGauges> {
  const { rows } = await pool.query<{ running: number; depth: number; oldest: number; parked: number; live: number }>(
    `SELECT (SELECT count(*) FROM traversal WHERE outcome IS NULL)::int AS running,
            (SELECT count(*) FROM job WHERE locked_by IS NULL AND parked_until IS NULL)::int AS depth,
            coalesce((SELECT extract(epoch FROM now() - min(run_at)) FROM job WHERE locked_by IS NULL AND parked_until IS NULL AND run_at <= now()), 0)::float8 AS oldest,
            (SELECT count(*) FROM job WHERE parked_until IS NOT NULL)::int AS parked,
            (SELECT count(*) FROM worker WHERE stopped_at IS NULL AND state NOT IN ('dead', 'stopped')
                AND heartbeat_at > now() - $1 * interval '1 millisecond')::int AS live`,
    [leaseMs],
  )
  const r = rows[0]!
  return { traversalsRunning: r.running, queueDepth: r.depth, oldestReadyJobSeconds: r.oldest, parkedNodes: r.parked, liveWorkers: r.live }
}
