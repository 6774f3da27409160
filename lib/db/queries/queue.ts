/**
 * The job queue: a table claimed with FOR UPDATE SKIP LOCKED (graphile-worker's
 * pattern), woken by NOTIFY kiln_jobs. Jobs are inserted by the engine
 * functions in the same transaction that makes a node ready, and deleted by the
 * one that finishes it, so readiness and the message can never part.
 */
import type pg from 'pg'
import type { ClaimedJob } from '../../engine/ports'
import { claimedWithBegin, settleTraversal } from './node'
import { toClaimedJob } from './rows'

/** Claim up to `limit` ready jobs, taking turns between projects, without beginning them (kiln_claim). */
export async function claimJobs(pool: pg.Pool, workerId: string, limit: number): Promise<ClaimedJob[]> {
  if (limit <= 0) return []
  const { rows } = await pool.query('SELECT * FROM kiln_claim($1, $2)', [workerId, limit])
  return rows.map(toClaimedJob).sort((a, b) => a.id - b.id)
}

/** A worker's cap on each project's share of its slots, and the jobs it holds per project now. */
export interface ProjectShare {
  cap: number
  used: ReadonlyMap<string, number>
}

/**
 * Claim up to `limit` ready jobs, taking turns between projects and keeping each
 * project within `share.cap` of this worker's slots, and begin each node job in
 * the same transaction (kiln_claim_jobs): a queued node costs one round trip
 * before its action. A job whose begin would have had to wait comes back
 * without `begun` and is begun on its own. `lazyTypes` (the worker's
 * state-only resource types): a claim that locked only rows of these commits
 * without waiting for the disk. `capped`: ready jobs of a project at its cap
 * were left (claim again when a slot frees up).
 */
export async function claimFairly(
  pool: pg.Pool, workerId: string, limit: number, leaseMs: number, lazyTypes: readonly string[] = [], share?: ProjectShare,
): Promise<{ jobs: ClaimedJob[]; capped: boolean }> {
  if (limit <= 0) return { jobs: [], capped: false }
  const lazy = lazyTypes.length ? JSON.stringify(lazyTypes) : null
  const used = share ? JSON.stringify(Object.fromEntries(share.used)) : '{}'
  const { rows } = await pool.query({
    name: 'kiln_claim_jobs',
    text: 'SELECT kiln_claim_jobs($1, $2, $3, $4, $5, $6) AS out',
    values: [workerId, limit, leaseMs, lazy, share?.cap ?? null, used],
  })
  const out = rows[0].out as { jobs: { job: Record<string, unknown>; begun: unknown }[]; settle: { stack_id: string; traversal_id: string }[]; capped: boolean }
  for (const s of out.settle) await settleTraversal(pool, s.stack_id, s.traversal_id)
  return { jobs: out.jobs.map(({ job, begun }) => claimedWithBegin(job, begun)).sort((a, b) => a.id - b.id), capped: out.capped === true }
}

/** claimFairly without a cap: the jobs only. */
export async function claimAndBeginJobs(pool: pg.Pool, workerId: string, limit: number, leaseMs: number, lazyTypes: readonly string[] = []): Promise<ClaimedJob[]> {
  return (await claimFairly(pool, workerId, limit, leaseMs, lazyTypes)).jobs
}

/** Give back claimed jobs this worker is not running (after an ambiguous failure, or on shutdown). */
export async function releaseJobs(pool: pg.Pool, workerId: string, keep: number[]): Promise<number> {
  const { rowCount } = await pool.query(
    `UPDATE job SET locked_by = NULL, locked_at = NULL WHERE locked_by = $1 AND NOT (id = ANY($2::bigint[]))`,
    [workerId, keep],
  )
  if (rowCount) await pool.query(`SELECT pg_notify('kiln_jobs', '')`)
  return rowCount ?? 0
}

/** Delete a finished non-node job (rollback). */
export async function completeJob(pool: pg.Pool, workerId: string, jobId: number): Promise<void> {
  await pool.query('DELETE FROM job WHERE id = $1 AND locked_by = $2', [jobId, workerId])
}
