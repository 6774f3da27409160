/**
 * Resource signals (OS::Heat::WaitConditionHandle): stored by the API, read
 * by a wait condition's action in a worker, which parks until a signal to its
 * handle wakes it (kiln_wake, lib/db/functions/27_wake.sql).
 */
import type pg from 'pg'
import { withTransaction } from '../client'

/** The wake key a signal to a handle fires (ParkWait.wakeKey); kiln_clear_hook (54_node_hook.sql) builds the same. */
export const signalWakeKey = (stackId: string, handle: string) => `signal ${stackId} ${handle}`

export interface SignalRecord {
  id: string
  status: 'SUCCESS' | 'FAILURE'
  reason: string
  data: unknown
}

export interface SignalTarget {
  uuid: string
  projectId: string
  stackId: string
  name: string
  type: string
  action: string
  status: string
  physicalId: string | null
  data: Record<string, unknown> | null
  stackName: string
  properties: Record<string, unknown>
  attributes: Record<string, unknown>
}

const targetColumns = `r.uuid, s.project_id, r.stack_id, s.name AS stack_name, r.name, r.type, r.action, r.status, r.physical_id, r.data, r.properties, r.attributes`

function toTarget(row: Record<string, unknown>): SignalTarget {
  return {
    uuid: row.uuid as string,
    projectId: row.project_id as string,
    stackId: row.stack_id as string,
    name: row.name as string,
    type: row.type as string,
    action: row.action as string,
    status: row.status as string,
    physicalId: (row.physical_id as string | null) ?? null,
    data: (row.data as Record<string, unknown> | null) ?? null,
    stackName: row.stack_name as string,
    properties: (row.properties as Record<string, unknown> | null) ?? {},
    attributes: (row.attributes as Record<string, unknown> | null) ?? {},
  }
}

/** The row a resource name of a stack stands for now: not deleted, the newest (a replacement over the row it replaces). */
export async function signalTarget(pool: pg.Pool, stackId: string, name: string): Promise<SignalTarget | null> {
  const { rows } = await pool.query(
    `SELECT ${targetColumns} FROM resource r JOIN stack s ON s.id = r.stack_id
      WHERE r.stack_id = $1 AND r.name = $2 AND NOT (r.action = 'DELETE' AND r.status = 'COMPLETE') AND r.action <> 'INIT'
      ORDER BY r.id DESC LIMIT 1`,
    [stackId, name],
  )
  return rows[0] ? toTarget(rows[0]) : null
}

/** A row by its uuid (a signal token names its handle's row). */
export async function signalTargetByUuid(pool: pg.Pool, uuid: string): Promise<SignalTarget | null> {
  const { rows } = await pool.query(
    `SELECT ${targetColumns} FROM resource r JOIN stack s ON s.id = r.stack_id WHERE r.uuid = $1 AND s.deleted_at IS NULL`,
    [uuid],
  )
  return rows[0] ? toTarget(rows[0]) : null
}

/**
 * Store a signal and wake its waiters, in one transaction. Without an id the
 * signal takes the next number (Heat: "Signal N received"); signals of one
 * handle are numbered one at a time (an advisory lock on the handle).
 */
export async function storeSignal(
  pool: pg.Pool,
  s: { stackId: string; handle: string; id: string | null; status: 'SUCCESS' | 'FAILURE'; reason: string | null; data: unknown },
): Promise<{ id: string; count: number }> {
  return withTransaction(pool, async (c) => {
    await c.query(`SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2, 0))`, [s.stackId, s.handle])
    const { rows } = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM resource_signal WHERE stack_id = $1 AND handle = $2`, [s.stackId, s.handle])
    const number = rows[0]!.n + 1
    const id = s.id ?? String(number)
    await c.query(
      `INSERT INTO resource_signal (stack_id, handle, signal_id, status, reason, data) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (stack_id, handle, signal_id) DO UPDATE SET status = EXCLUDED.status, reason = EXCLUDED.reason, data = EXCLUDED.data, created_at = now()`,
      [s.stackId, s.handle, id, s.status, s.reason ?? `Signal ${number} received`, JSON.stringify(s.data ?? null)],
    )
    // In this transaction: a node this wakes finds the signal.
    await c.query(`SELECT kiln_wake($1)`, [signalWakeKey(s.stackId, s.handle)])
    const after = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM resource_signal WHERE stack_id = $1 AND handle = $2`, [s.stackId, s.handle])
    return { id, count: after.rows[0]!.n }
  })
}

/** The handle's signals and how many times its wake key had fired, in one snapshot. */
export async function readSignals(pool: pg.Pool, stackId: string, handle: string): Promise<{ wakeKey: string; seen: number; signals: SignalRecord[] }> {
  const wakeKey = signalWakeKey(stackId, handle)
  const { rows } = await pool.query(
    `SELECT coalesce((SELECT seq FROM wake WHERE key = $3), 0)::bigint AS seen,
            coalesce((SELECT json_agg(json_build_object('id', signal_id, 'status', status, 'reason', reason, 'data', data) ORDER BY id)
                        FROM resource_signal WHERE stack_id = $1 AND handle = $2), '[]') AS signals`,
    [stackId, handle, wakeKey],
  )
  return { wakeKey, seen: Number(rows[0].seen), signals: rows[0].signals as SignalRecord[] }
}

export async function listSignals(pool: pg.Pool, stackId: string, handle: string): Promise<SignalRecord[]> {
  const { rows } = await pool.query(`SELECT signal_id, status, reason, data FROM resource_signal WHERE stack_id = $1 AND handle = $2 ORDER BY id`, [stackId, handle])
  return rows.map((r) => ({ id: r.signal_id as string, status: r.status as SignalRecord['status'], reason: r.reason as string, data: r.data }))
}

export async function clearSignals(pool: pg.Pool, stackId: string, handle: string): Promise<void> {
  await pool.query(
    `WITH gone AS (DELETE FROM resource_signal WHERE stack_id = $1 AND handle = $2)
     DELETE FROM wake WHERE key = $3`,
    [stackId, handle, signalWakeKey(stackId, handle)],
  )
}

/** Clear the hook a node of the stack's current traversal waits at (kiln_clear_hook); false when none waits there. */
export async function clearHook(pool: pg.Pool, stackId: string, resource: string, hook: string): Promise<boolean> {
  const { rows } = await pool.query<{ ok: boolean }>('SELECT kiln_clear_hook($1, $2, $3) AS ok', [stackId, resource, hook])
  return rows[0]!.ok
}
