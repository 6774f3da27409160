/**
 * HTTP resource providers (lib/resources/provider): their registrations, and
 * the wake a provider's callback fires. Registering, refreshing or removing
 * one sends NOTIFY kiln_providers in its transaction, so every process
 * reloads its provider types when the change commits.
 */
import type pg from 'pg'
import type { TypeDeclT } from '../../resources/provider/protocol'
import type { ProviderSource } from '../../resources/provider/provider-types'
import type { ProviderRecord } from '../../resources/provider/type'
import { withTransaction } from '../client'
import { signalWakeKey } from './signals'

export const PROVIDERS_CHANNEL = 'kiln_providers'

export interface ProviderListing {
  id: string
  name: string
  prefix: string
  url: string
  /** null: the admin's, for every project. */
  projectId: string | null
  types: TypeDeclT[]
  createdAt: string
  updatedAt: string
}

const toRecord = (r: Record<string, unknown>): ProviderRecord => ({
  id: r.id as string,
  projectId: (r.project_id as string | null) ?? null,
  name: r.name as string,
  prefix: r.prefix as string,
  url: r.url as string,
  secret: r.secret as string,
  types: r.types as TypeDeclT[],
})

const toListing = (r: Record<string, unknown>): ProviderListing => ({
  id: r.id as string,
  name: r.name as string,
  prefix: r.prefix as string,
  url: r.url as string,
  projectId: (r.project_id as string | null) ?? null,
  types: r.types as TypeDeclT[],
  createdAt: (r.created_at as Date).toISOString(),
  updatedAt: (r.updated_at as Date).toISOString(),
})

export type SaveOutcome = { outcome: 'saved'; provider: ProviderListing } | { outcome: 'prefix_taken' }

/** Register a provider, or replace the one of the same project and name (a refresh, or a new URL or secret). */
export async function saveProvider(pool: pg.Pool, p: Omit<ProviderRecord, 'id'>): Promise<SaveOutcome> {
  return withTransaction(pool, async (c) => {
    // One registration at a time: two first registrations of a prefix, or of a name, cannot both pass the checks.
    await c.query(`SELECT pg_advisory_xact_lock(hashtextextended('kiln provider registration', 0))`)
    const byPrefix = (await c.query(`SELECT id, project_id, name FROM provider WHERE prefix = $1`, [p.prefix])).rows[0]
    if (byPrefix && (byPrefix.project_id !== p.projectId || byPrefix.name !== p.name)) return { outcome: 'prefix_taken' as const }
    const mine = (await c.query(`SELECT id FROM provider WHERE project_id IS NOT DISTINCT FROM $1 AND name = $2`, [p.projectId, p.name])).rows[0]
    const values = [p.projectId, p.name, p.prefix, p.url, p.secret, JSON.stringify(p.types)]
    const { rows } = mine
      ? await c.query(`UPDATE provider SET prefix = $1, url = $2, secret = $3, types = $4, updated_at = now() WHERE id = $5 RETURNING *`, [...values.slice(2), mine.id])
      : await c.query(`INSERT INTO provider (project_id, name, prefix, url, secret, types) VALUES ($1, $2, $3, $4, $5, $6) RETURNING *`, values)
    await c.query(`SELECT pg_notify($1, '')`, [PROVIDERS_CHANNEL])
    return { outcome: 'saved' as const, provider: toListing(rows[0]) }
  })
}

/** The providers a project may use: its own and the admin's, without their secrets. */
export async function listProviders(pool: pg.Pool, projectId: string): Promise<ProviderListing[]> {
  const { rows } = await pool.query(`SELECT * FROM provider WHERE project_id = $1 OR project_id IS NULL ORDER BY prefix`, [projectId])
  return rows.map(toListing)
}

/** One provider of the project (or the admin's when `projectId` is null), with its secret; null when there is none. */
export async function providerNamed(pool: pg.Pool, projectId: string | null, name: string): Promise<ProviderRecord | null> {
  const { rows } = await pool.query(`SELECT * FROM provider WHERE project_id IS NOT DISTINCT FROM $1 AND name = $2`, [projectId, name])
  return rows[0] ? toRecord(rows[0]) : null
}

/** Every provider, with its secret: what a process builds its provider types from. */
export async function allProviders(pool: pg.Pool): Promise<ProviderRecord[]> {
  const { rows } = await pool.query(`SELECT * FROM provider ORDER BY prefix`)
  return rows.map(toRecord)
}

/** What changes whenever a provider is saved or removed: a process compares it to know whether its types are current. */
export async function providersVersion(pool: pg.Pool): Promise<string> {
  const { rows } = await pool.query(`SELECT count(*)::int AS n, coalesce(max(updated_at), 'epoch')::text AS at, coalesce(sum(hashtext(id::text)), 0)::text AS ids FROM provider`)
  return `${rows[0].n}/${rows[0].at}/${rows[0].ids}`
}

export type RemoveOutcome = { outcome: 'removed' } | { outcome: 'absent' } | { outcome: 'in_use'; stacks: string[] }

/** Remove a provider, unless a resource of one of its types still exists (in any stack of any project that may use it). */
export async function removeProvider(pool: pg.Pool, projectId: string | null, name: string): Promise<RemoveOutcome> {
  return withTransaction(pool, async (c) => {
    const { rows } = await c.query(`SELECT id, prefix FROM provider WHERE project_id IS NOT DISTINCT FROM $1 AND name = $2 FOR UPDATE`, [projectId, name])
    if (!rows[0]) return { outcome: 'absent' as const }
    const used = await c.query(
      `SELECT DISTINCT s.name FROM resource r JOIN stack s ON s.id = r.stack_id
        WHERE s.deleted_at IS NULL AND starts_with(r.type, $1 || '::') AND NOT (r.action = 'DELETE' AND r.status = 'COMPLETE') AND r.action <> 'INIT'
          AND ($2::uuid IS NULL OR s.project_id = $2)
        ORDER BY 1 LIMIT 10`,
      [rows[0].prefix, projectId],
    )
    if (used.rows.length) return { outcome: 'in_use' as const, stacks: used.rows.map((r) => r.name as string) }
    await c.query(`DELETE FROM provider WHERE id = $1`, [rows[0].id])
    await c.query(`SELECT pg_notify($1, '')`, [PROVIDERS_CHANNEL])
    return { outcome: 'removed' as const }
  })
}

/** The provider behind a row of a stack (by its type's prefix), for a callback; null when there is none. */
export async function providerOfRow(pool: pg.Pool, stackId: string, resourceUuid: string): Promise<{ provider: ProviderRecord; projectId: string } | null> {
  const { rows } = await pool.query(
    `SELECT p.*, s.project_id AS stack_project FROM resource r JOIN stack s ON s.id = r.stack_id
       JOIN provider p ON starts_with(r.type, p.prefix || '::')
      WHERE r.stack_id = $1 AND r.uuid = $2 AND s.deleted_at IS NULL`,
    [stackId, resourceUuid],
  )
  return rows[0] ? { provider: toRecord(rows[0]), projectId: rows[0].stack_project as string } : null
}

/** Wake the row's action parked on its provider (a callback); returns how many parked nodes woke. */
export async function wakeProviderWait(pool: pg.Pool, stackId: string, handle: string): Promise<number> {
  const { rows } = await pool.query(`SELECT kiln_wake($1) AS n`, [signalWakeKey(stackId, handle)])
  return rows[0].n as number
}

/** Where a process's ProviderTypes read the registrations from. */
export const providerSource = (pool: pg.Pool): ProviderSource => ({ all: () => allProviders(pool), version: () => providersVersion(pool) })
