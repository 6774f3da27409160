/**
 * Resource rows as the services read them: the listing of a stack's rows,
 * the values outputs resolve from, the secrets rows hold, and the data
 * (adoption records) an update or an import checks external_id against.
 */
import type pg from 'pg'

/** A resource row as stored (`SELECT r.*`), with the name (`hostname:pid`) of the worker holding its lock. */
export type ResourceListRow = {
  id: number
  uuid: string
  stack_id: string
  name: string
  type: string
  action: string
  status: string
  status_reason: string
  physical_id: string | null
  current_template_id: string | null
  requires: number[]
  replaces: number | null
  replaced_by: number | null
  properties: Record<string, unknown> | null
  attributes: Record<string, unknown> | null
  engine_id: string | null
  lock_traversal_id: string | null
  lease_expires_at: Date | null
  waiter_traversal_id: string | null
  waiter_is_update: boolean | null
  last_traversal_id: string | null
  created_at: Date
  updated_at: Date
  worker_name: string | null
}

/**
 * The stack's rows by name and id (`all`: deleted ones too; `id`: that row alone, deleted or not). One SQL
 * statement, not Prisma Client (a findMany and a second one for the lock holders' names): bench/listings.ts,
 * a stack of 1,000 rows: median 16 ms against 28 ms.
 */
export async function listResources(pool: pg.Pool, stackId: string, opts: { all?: boolean; id?: number } = {}): Promise<ResourceListRow[]> {
  const { rows } = await pool.query<ResourceListRow>(
    `SELECT r.*, CASE WHEN w.id IS NULL THEN NULL ELSE w.hostname || ':' || w.pid END AS worker_name FROM resource r LEFT JOIN worker w ON w.id = r.engine_id
      WHERE r.stack_id = $1 ${opts.id !== undefined ? 'AND r.id = $2' : opts.all ? '' : `AND NOT (r.action = 'DELETE' AND r.status = 'COMPLETE')`} ORDER BY r.name, r.id`,
    opts.id !== undefined ? [stackId, opts.id] : [stackId],
  )
  return rows
}

/** What a row holds that may be secret: its secret forms, and its attributes (properties) when its type declares secret ones. */
export type SecretHoldingRow = { type: string; secret_forms: string[] | null; attributes: Record<string, unknown> | null; properties: Record<string, unknown> | null }

/** The stack's rows that hold a secret: with secret forms, or of a type in `secretTypes` (one indexed query). */
export async function secretHoldingRows(pool: pg.Pool, stackId: string, secretTypes: string[], propertySecretTypes: string[]): Promise<SecretHoldingRow[]> {
  const { rows } = await pool.query<SecretHoldingRow>(
    `SELECT type, secret_forms, CASE WHEN type = ANY($2::text[]) THEN attributes END AS attributes, CASE WHEN type = ANY($3::text[]) THEN properties END AS properties
       FROM resource WHERE stack_id = $1 AND (cardinality(secret_forms) > 0 OR type = ANY($2::text[]))`,
    [stackId, secretTypes, propertySecretTypes],
  )
  return rows
}

/** What an output may read of a resource: the newest completed row of each name. */
export type OutputSourceRow = { name: string; type: string; physical_id: string | null; attributes: Record<string, unknown> | null; secret_forms: string[] | null }

export async function outputSourceRows(pool: pg.Pool, stackId: string): Promise<OutputSourceRow[]> {
  const { rows } = await pool.query<OutputSourceRow>(
    `SELECT DISTINCT ON (name) name, type, physical_id, attributes, secret_forms FROM resource
      WHERE stack_id = $1 AND action IN ('CREATE', 'UPDATE', 'CHECK') AND status = 'COMPLETE' AND current_template_id IS NOT NULL
      ORDER BY name, id DESC`,
    [stackId],
  )
  return rows
}

/** The ids of the stack's rows (deleted ones too), by type. */
export async function resourceIdsByType(pool: pg.Pool, stackId: string): Promise<Record<string, number[]>> {
  const { rows } = await pool.query(`SELECT type, array_agg(id ORDER BY id) AS ids FROM resource WHERE stack_id = $1 GROUP BY type`, [stackId])
  return Object.fromEntries(rows.map((t) => [String(t.type), (t.ids as (string | number)[]).map(Number)]))
}

/** The plugin data (adoption record) of the newest live row of each name (of these `names`, or all) that was created. */
export async function heldRowData(pool: pg.Pool, stackId: string, names?: string[]): Promise<{ name: string; data: Record<string, unknown> | null }[]> {
  const { rows } = await pool.query(
    `SELECT DISTINCT ON (name) name, data FROM resource
      WHERE stack_id = $1 ${names ? 'AND name = ANY($2)' : ''} AND properties IS NOT NULL AND NOT (action = 'DELETE' AND status = 'COMPLETE')
      ORDER BY name, id DESC`,
    names ? [stackId, names] : [stackId],
  )
  return rows
}
