/** Worker registration, heartbeats and the sweeper (SQL in lib/db/functions/50_sweep.sql and 53_heartbeat.sql). */
import os from 'node:os'
import type pg from 'pg'

export async function registerWorker(pool: pg.Pool, id: string, concurrency: number, version: string): Promise<void> {
  await pool.query(
    `INSERT INTO worker (id, hostname, pid, state, concurrency, version) VALUES ($1, $2, $3, 'running', $4, $5)`,
    [id, os.hostname(), process.pid, concurrency, version],
  )
}

export async function setWorkerState(pool: pg.Pool, id: string, state: 'running' | 'draining' | 'stopped'): Promise<void> {
  await pool.query(`UPDATE worker SET state = $2, stopped_at = CASE WHEN $2 = 'stopped' THEN now() ELSE stopped_at END WHERE id = $1`, [id, state])
}

/**
 * Extends the leases of the rows this worker is acting on. Returns how many
 * were extended, or -1 if this worker was declared dead (stopped).
 */
export async function heartbeat(pool: pg.Pool, id: string, leaseMs: number, rows: number[]): Promise<number> {
  const { rows: out } = await pool.query('SELECT kiln_heartbeat($1, $2, $3::int[]) AS n', [id, leaseMs, rows])
  return Number(out[0].n)
}

export interface SweepReport {
  stacks: number
  broken: number
  requeued: number
  released: number
  timedOut: number
  /** Parked nodes whose time was up, made ready. */
  woken: number
}

export async function sweep(pool: pg.Pool, leaseMs: number): Promise<SweepReport> {
  const report: SweepReport = { stacks: 0, broken: 0, requeued: 0, released: 0, timedOut: 0, woken: 0 }
  const { rows } = await pool.query('SELECT stack_id FROM kiln_sweep_candidates($1) ORDER BY stack_id', [leaseMs])
  for (const { stack_id } of rows as { stack_id: string }[]) {
    const res = await pool.query('SELECT kiln_sweep_stack($1, $2) AS out', [stack_id, leaseMs])
    const out = res.rows[0].out as Record<string, number | boolean>
    report.stacks++
    report.broken += Number(out.broken ?? 0)
    report.requeued += Number(out.requeued ?? 0)
    report.released += Number(out.released ?? 0)
    if (out.timed_out) report.timedOut++
  }
  await pool.query(`UPDATE worker SET state = 'dead' WHERE stopped_at IS NULL AND state <> 'dead' AND heartbeat_at < now() - $1 * interval '1 millisecond'`, [leaseMs])
  // Parked nodes whose wait is over (25_park.sql): ready again, announced by NOTIFY kiln_jobs.
  const { rows: due } = await pool.query('SELECT kiln_wake_due() AS n')
  report.woken = Number(due[0].n)
  return report
}

/** When the sweeper should next look: the earliest lease expiry, traversal deadline or end of a parked node's wait. */
export async function nextSweepAt(pool: pg.Pool): Promise<Date | null> {
  const { rows } = await pool.query(
    `SELECT least((SELECT min(lease_expires_at) FROM resource WHERE engine_id IS NOT NULL),
                  (SELECT min(deadline) FROM traversal WHERE outcome IS NULL),
                  (SELECT min(parked_until) FROM job WHERE parked_until IS NOT NULL)) AS at`,
  )
  return (rows[0]?.at as Date | null) ?? null
}

/**
 * Keeps at most `keep` events per stack (KILN_MAX_EVENTS_PER_STACK): the oldest
 * go, so what is left is still gap-free, starting later. Only stacks over the
 * limit are touched (the newest event's number says how many a stack has had).
 * Returns rows deleted.
 */
export async function pruneEvents(pool: pg.Pool, keep: number): Promise<number> {
  const { rows } = await pool.query(
    `SELECT id, last_seq FROM (SELECT id, kiln_last_seq(id) AS last_seq FROM stack) s WHERE last_seq > $1`,
    [keep],
  )
  let deleted = 0
  for (const r of rows as { id: string; last_seq: string }[]) {
    const res = await pool.query(`DELETE FROM event WHERE stack_id = $1 AND seq <= $2`, [r.id, Number(r.last_seq) - keep])
    deleted += res.rowCount ?? 0
  }
  return deleted
}

export interface LiveWorker {
  id: string
  hostname: string
  pid: number
  state: string
  concurrency: number
  heartbeatAt: Date
}

/** Workers not stopped whose heartbeat is younger than a lease, oldest first. */
export async function liveWorkers(pool: pg.Pool, leaseMs: number): Promise<LiveWorker[]> {
  const { rows } = await pool.query(
    `SELECT id, hostname, pid, state, concurrency, heartbeat_at FROM worker
        WHERE stopped_at IS NULL AND heartbeat_at > now() - $1 * interval '1 millisecond' ORDER BY started_at`,
    [leaseMs],
  )
  return rows.map((w) => ({ id: w.id, hostname: w.hostname, pid: w.pid, state: w.state, concurrency: w.concurrency, heartbeatAt: new Date(w.heartbeat_at) }))
}

/** The workers with these ids (live or stopped). */
export async function workersByIds(pool: pg.Pool, ids: string[]): Promise<{ id: string; hostname: string; pid: number; state: string; stopped_at: Date | null }[]> {
  const { rows } = await pool.query(`SELECT id, hostname, pid, state, stopped_at FROM worker WHERE id = ANY($1::uuid[])`, [ids])
  return rows
}
