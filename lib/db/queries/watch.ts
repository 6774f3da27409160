/**
 * Following stacks' events live (kiln_watch_events, 12_watch_events.sql): a step
 * sends NOTIFY kiln_events only for a stack somebody watches, so whoever
 * LISTENs registers what it follows here, and keeps the watch alive.
 */
import type pg from 'pg'
import { NIL_UUID } from '../../ids'

/** Watch every stack (test harnesses, the bench's --watched). */
export const ALL_STACKS = NIL_UUID

/** How long a harness's all-stacks watch lasts: longer than any test run or bench, never renewed. */
export const HARNESS_WATCH_MS = 24 * 3600_000

/**
 * Follow `stackIds` for `ttlMs` more. Returns each stack's last event number:
 * every event after it is announced by a NOTIFY (a step numbering events when
 * the watch is taken commits first, and is counted in).
 */
export async function watchStackEvents(pool: pg.Pool | pg.Client, watcher: string, stackIds: string[], ttlMs: number): Promise<Map<string, number>> {
  const { rows } = await pool.query({
    name: 'kiln_watch_events',
    text: 'SELECT stack_id, last_seq FROM kiln_watch_events($1, $2::uuid[], $3)',
    values: [watcher, stackIds, ttlMs],
  })
  return new Map(rows.map((r) => [String(r.stack_id), Number(r.last_seq)]))
}

/** Up to `limit` events of a stack after `afterSeq`, in order (the rows the bridge turns into messages). */
export async function eventsAfter(pool: pg.Pool, stackId: string, afterSeq: number, limit: number): Promise<Record<string, unknown>[]> {
  const { rows } = await pool.query(`SELECT * FROM event WHERE stack_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, [stackId, afterSeq, limit])
  return rows
}

/** When the server last (re)started: a crash may have lost lazily committed steps since the numbers a client saw. */
export async function serverStartTime(pool: pg.Pool): Promise<Date> {
  const { rows } = await pool.query(`SELECT pg_postmaster_start_time() AS started`)
  return rows[0].started as Date
}

/**
 * For each stack and the last event number sent for it, the last number at
 * or below it whose event was written before `restartedAt` (when the server
 * restarted since: events written after it carry numbers handed out again);
 * without a restart, the last number at or below it that exists.
 */
export async function eventsStillHeld(pool: pg.Pool, sent: Map<string, number>, restartedAt: Date | null): Promise<{ stackId: string; sent: number; kept: number }[]> {
  const ids = [...sent.keys()]
  // Backwards from the last number sent; stops at the first event older than the restart.
  const { rows } = await pool.query(
    `SELECT w.id, w.sent, coalesce((SELECT e.seq FROM event e WHERE e.stack_id = w.id AND e.seq <= w.sent AND ($3::timestamptz IS NULL OR e.created_at < $3)
                                     ORDER BY e.seq DESC LIMIT 1), 0) AS kept
       FROM unnest($1::uuid[], $2::bigint[]) AS w(id, sent) JOIN stack s ON s.id = w.id`,
    [ids, ids.map((id) => sent.get(id)), restartedAt],
  )
  return rows.map((r) => ({ stackId: String(r.id), sent: Number(r.sent), kept: Number(r.kept) }))
}

/** A stack's project, and when the server last (re)started, read together. */
export async function stackProjectAndServerStart(pool: pg.Pool, stackId: string): Promise<{ projectId: string | null; started: Date }> {
  const { rows } = await pool.query(`SELECT (SELECT project_id FROM stack WHERE id = $1) AS project_id, pg_postmaster_start_time() AS started`, [stackId])
  return { projectId: (rows[0].project_id as string | null) ?? null, started: rows[0].started as Date }
}
