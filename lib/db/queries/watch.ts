/**
 * Following stacks' events live (kiln_watch_events, 10_events.sql): a step
 * sends NOTIFY kiln_events only for a stack somebody watches, so whoever
 * LISTENs registers what it follows here, and keeps the watch alive.
 */
import type pg from 'pg'

/** Watch every stack (test harnesses, the bench's --watched). */
export const ALL_STACKS = '00000000-0000-0000-0000-000000000000'

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
