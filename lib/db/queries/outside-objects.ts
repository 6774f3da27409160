/**
 * Records of objects outside Kiln that resources made or are making (table
 * outside_object; the contract is in lib/resources/types.ts). Each call is one
 * short transaction, committed before the caller touches the outside world.
 */
import type pg from 'pg'
import type { OutsideObjectStore } from '../../engine/ports'
import type { AdoptOutcome, ClaimOutcome, OutsideKind, OutsideOwner, OutsideRecord, OutsideRef } from '../../resources/types'
import { withTransaction, type Queryable } from '../client'

/** Advisory lock class of a project's workspace quota ('KOBJ'); events use 'KILN' (10_events.sql). */
const QUOTA_LOCK_CLASS = 0x4b4f424a

type Raw = Record<string, unknown>

function toRecord(r: Raw): OutsideRecord {
  return {
    kind: r.kind as OutsideRecord['kind'],
    scope: String(r.scope),
    key: String(r.key),
    projectId: String(r.project_id),
    stackId: String(r.stack_id),
    resourceName: String(r.resource_name),
    resourceUuid: String(r.resource_uuid),
    state: r.state as OutsideRecord['state'],
    sizeBytes: Number(r.size_bytes),
    snapshotOf: (r.snapshot_of as string | null) ?? null,
  }
}

/** Refs as three parallel arrays, for `unnest`; sorted, so that concurrent claims lock records in one order. */
function columns(refs: OutsideRef[]): [string[], string[], string[]] {
  const sorted = [...refs].sort((a, b) => a.kind.localeCompare(b.kind) || a.scope.localeCompare(b.scope) || a.key.localeCompare(b.key))
  return [sorted.map((r) => r.kind), sorted.map((r) => r.scope), sorted.map((r) => r.key)]
}

const REFS = `(kind, scope, key) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))`

/** A claim or adoption that must record nothing: rolls its transaction back and carries the answer out. */
class Refusal<T extends { outcome: string } = ClaimOutcome> extends Error {
  constructor(readonly outcome: T) {
    super(outcome.outcome)
  }
}

async function claimOne(c: Queryable, owner: OutsideOwner, ref: OutsideRef, sizeBytes: number, snapshotOf: string | null = null): Promise<OutsideRecord | null> {
  // Insert, or else lock what is there; a record deleted between the two is inserted on the next turn.
  for (;;) {
    const inserted = await c.query(
      `INSERT INTO outside_object (kind, scope, key, project_id, stack_id, resource_name, resource_uuid, state, size_bytes, snapshot_of)
       VALUES ($1, $2, $3, $4, $5, $6, $7, 'creating', $8, $9) ON CONFLICT (kind, scope, key) DO NOTHING RETURNING id`,
      [ref.kind, ref.scope, ref.key, owner.projectId, owner.stackId, owner.resourceName, owner.resourceUuid, sizeBytes, snapshotOf],
    )
    if (inserted.rowCount) return null
    const { rows } = await c.query(
      `SELECT o.*, EXISTS (SELECT 1 FROM resource r WHERE r.uuid = o.resource_uuid AND r.engine_id IS NOT NULL AND r.lease_expires_at > now()) AS busy
         FROM outside_object o WHERE kind = $1 AND scope = $2 AND key = $3 FOR UPDATE OF o`,
      [ref.kind, ref.scope, ref.key],
    )
    const row = rows[0] as Raw | undefined
    if (!row) continue
    const rec = toRecord(row)
    // Only the logical resource that made it may take it over (a replacement row, a retry).
    if (rec.stackId !== owner.stackId || rec.resourceName !== owner.resourceName) throw new Refusal({ outcome: 'refused', ref, owner: rec })
    if (rec.resourceUuid !== owner.resourceUuid && row.busy === true) throw new Refusal({ outcome: 'busy', ref, owner: rec })
    await c.query(
      `UPDATE outside_object SET resource_uuid = $2, state = 'creating', size_bytes = greatest(size_bytes, $3), updated_at = now() WHERE id = $1`,
      [row.id, owner.resourceUuid, sizeBytes],
    )
    return rec
  }
}

export async function claimOutside(pool: pg.Pool, owner: OutsideOwner, refs: OutsideRef[], opts: { sizeBytes?: number; quotaBytes?: number; snapshotOf?: string } = {}): Promise<ClaimOutcome> {
  const size = opts.sizeBytes ?? 0
  try {
    return await withTransaction(pool, async (c) => {
      const quota = opts.quotaBytes
      const scope = refs[0]?.scope
      // One claim at a time per project for files under a quota: two concurrent writes must not both fit.
      if (quota !== undefined && scope !== undefined) await c.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [QUOTA_LOCK_CLASS, scope])
      const previous = new Map<OutsideRef, OutsideRecord | null>()
      const [kinds, scopes, keys] = columns(refs)
      for (let i = 0; i < kinds.length; i++) {
        const ref = refs.find((r) => r.kind === kinds[i] && r.scope === scopes[i] && r.key === keys[i])!
        previous.set(ref, await claimOne(c, owner, ref, size, opts.snapshotOf ?? null))
      }
      if (quota !== undefined && scope !== undefined) {
        const { rows } = await c.query(
          `SELECT coalesce(sum(size_bytes) FILTER (WHERE NOT ${REFS}), 0)::bigint AS others FROM outside_object WHERE kind = 'file' AND scope = $4`,
          [kinds, scopes, keys, scope],
        )
        const others = Number(rows[0].others)
        if (others + size > quota) throw new Refusal({ outcome: 'over_quota', usedBytes: others, limitBytes: quota })
      }
      return { outcome: 'claimed' as const, previous: refs.map((r) => previous.get(r) ?? null) }
    })
  } catch (err) {
    if (err instanceof Refusal) return err.outcome
    throw err
  }
}

/**
 * Adopt objects that exist as this row's (OutsideObjects.adopt: the rules are
 * there), all or none, in one transaction. A record is live when a resource
 * row of a stack not deleted still holds it and is not itself deleted.
 */
export async function adoptOutside(pool: pg.Pool, owner: OutsideOwner, refs: OutsideRef[], opts: { unrecorded: boolean; dryRun?: boolean; sizeBytes?: number }): Promise<AdoptOutcome> {
  if (opts.dryRun) return adoptionLook(pool, owner, refs, opts)
  try {
    return await withTransaction(pool, async (c) => {
      const previous = new Map<OutsideRef, OutsideRecord | null>()
      const [kinds, scopes, keys] = columns(refs)
      for (let i = 0; i < kinds.length; i++) {
        const ref = refs.find((r) => r.kind === kinds[i] && r.scope === scopes[i] && r.key === keys[i])!
        previous.set(ref, await adoptOne(c, owner, ref, opts))
      }
      return { outcome: 'adopted' as const, previous: refs.map((r) => previous.get(r) ?? null) }
    })
  } catch (err) {
    if (err instanceof Refusal) return err.outcome as AdoptOutcome
    throw err
  }
}

/** A record with whether a live row holds it and whether a worker acts on its row now. */
const ADOPTION_COLUMNS = `o.*,
            EXISTS (SELECT 1 FROM resource r JOIN stack s ON s.id = r.stack_id
                     WHERE r.uuid = o.resource_uuid AND s.deleted_at IS NULL AND NOT (r.action = 'DELETE' AND r.status = 'COMPLETE')) AS live,
            EXISTS (SELECT 1 FROM resource r WHERE r.uuid = o.resource_uuid AND r.engine_id IS NOT NULL AND r.lease_expires_at > now()) AS busy`

/** Why `owner` may not adopt the object of this record (with its live and busy flags), or null when it may. */
function adoptionRefusal(row: Raw, ref: OutsideRef, owner: OutsideOwner): AdoptOutcome | null {
  const rec = toRecord(row)
  const ours = rec.stackId === owner.stackId && rec.resourceName === owner.resourceName
  if (rec.projectId !== owner.projectId || (!ours && row.live === true)) return { outcome: 'refused', ref, owner: rec }
  if (rec.resourceUuid !== owner.resourceUuid && row.busy === true) return { outcome: 'busy', ref, owner: rec }
  return null
}

/**
 * A dry run of adoptOutside: the answer the adoption would give now, from one
 * read of the records (no transaction, no row lock: nothing is written).
 */
async function adoptionLook(db: Queryable, owner: OutsideOwner, refs: OutsideRef[], opts: { unrecorded: boolean }): Promise<AdoptOutcome> {
  const { rows } = await db.query(`SELECT ${ADOPTION_COLUMNS} FROM outside_object o WHERE ${REFS}`, columns(refs))
  const [kinds, scopes, keys] = columns(refs)
  const previous = new Map<OutsideRef, OutsideRecord | null>()
  for (let i = 0; i < kinds.length; i++) {
    const ref = refs.find((r) => r.kind === kinds[i] && r.scope === scopes[i] && r.key === keys[i])!
    const row = (rows as Raw[]).find((r) => r.kind === ref.kind && r.scope === ref.scope && r.key === ref.key)
    if (!row) {
      if (!opts.unrecorded) return { outcome: 'unrecorded', ref }
      previous.set(ref, null)
      continue
    }
    const refusal = adoptionRefusal(row, ref, owner)
    if (refusal) return refusal
    previous.set(ref, toRecord(row))
  }
  return { outcome: 'adopted', previous: refs.map((r) => previous.get(r) ?? null) }
}

async function adoptOne(c: Queryable, owner: OutsideOwner, ref: OutsideRef, opts: { unrecorded: boolean; sizeBytes?: number }): Promise<OutsideRecord | null> {
  const { rows } = await c.query(`SELECT ${ADOPTION_COLUMNS} FROM outside_object o WHERE kind = $1 AND scope = $2 AND key = $3 FOR UPDATE OF o`, [ref.kind, ref.scope, ref.key])
  const row = rows[0] as Raw | undefined
  if (!row) {
    if (!opts.unrecorded) throw new Refusal<AdoptOutcome>({ outcome: 'unrecorded', ref })
    const inserted = await c.query(
      `INSERT INTO outside_object (kind, scope, key, project_id, stack_id, resource_name, resource_uuid, state, size_bytes)
       VALUES ($1, $2, $3, $4, $5, $6, $7, 'present', $8) ON CONFLICT (kind, scope, key) DO NOTHING`,
      [ref.kind, ref.scope, ref.key, owner.projectId, owner.stackId, owner.resourceName, owner.resourceUuid, opts.sizeBytes ?? 0],
    )
    // Recorded by someone else since the look: adopt that record as any other.
    if (!inserted.rowCount) return adoptOne(c, owner, ref, opts)
    return null
  }
  const rec = toRecord(row)
  const refusal = adoptionRefusal(row, ref, owner)
  if (refusal) throw new Refusal<AdoptOutcome>(refusal)
  await c.query(
    `UPDATE outside_object SET stack_id = $2, resource_name = $3, resource_uuid = $4, state = 'present', size_bytes = coalesce($5, size_bytes), updated_at = now() WHERE id = $1`,
    [row.id, owner.stackId, owner.resourceName, owner.resourceUuid, opts.sizeBytes ?? null],
  )
  return rec
}

export async function findOutside(db: Queryable, refs: OutsideRef[]): Promise<(OutsideRecord | null)[]> {
  const { rows } = await db.query(`SELECT * FROM outside_object WHERE ${REFS}`, columns(refs))
  const found = (rows as Raw[]).map(toRecord)
  return refs.map((r) => found.find((f) => f.kind === r.kind && f.scope === r.scope && f.key === r.key) ?? null)
}

/** Every record of `kind` on `scope`, of every project (a type's quotas and budgets sum over them). */
export async function inScopeOutside(db: Queryable, kind: OutsideKind, scope: string): Promise<OutsideRecord[]> {
  const { rows } = await db.query(`SELECT * FROM outside_object WHERE kind = $1 AND scope = $2 ORDER BY key`, [kind, scope])
  return (rows as Raw[]).map(toRecord)
}

export async function settleOutside(db: Queryable, owner: OutsideOwner, refs: OutsideRef[], sizeBytes?: number): Promise<void> {
  await db.query(
    `UPDATE outside_object SET state = 'present', size_bytes = coalesce($5, size_bytes), updated_at = now() WHERE ${REFS} AND resource_uuid = $4`,
    [...columns(refs), owner.resourceUuid, sizeBytes ?? null],
  )
}

export async function startDeleteOutside(db: Queryable, owner: OutsideOwner, refs: OutsideRef[]): Promise<OutsideRef[]> {
  const { rows } = await db.query(
    `UPDATE outside_object SET state = 'deleting', updated_at = now() WHERE ${REFS} AND resource_uuid = $4 RETURNING kind, scope, key`,
    [...columns(refs), owner.resourceUuid],
  )
  const mine = rows as OutsideRef[]
  return refs.filter((r) => mine.some((m) => m.kind === r.kind && m.scope === r.scope && m.key === r.key))
}

export async function forgetOutside(db: Queryable, owner: OutsideOwner, refs: OutsideRef[]): Promise<void> {
  await db.query(`DELETE FROM outside_object WHERE ${REFS} AND resource_uuid = $4`, [...columns(refs), owner.resourceUuid])
}

/** The store's port (lib/engine/ports.ts). */
export function outsideObjectStore(pool: pg.Pool, retry: <T>(what: string, fn: () => Promise<T>) => Promise<T>): OutsideObjectStore {
  return {
    claim: (owner, refs, opts) => retry('claim outside object', () => claimOutside(pool, owner, refs, opts)),
    find: (refs) => retry('find outside object', () => findOutside(pool, refs)),
    inScope: (kind, scope) => retry('list outside objects', () => inScopeOutside(pool, kind, scope)),
    settle: (owner, refs, size) => retry('settle outside object', () => settleOutside(pool, owner, refs, size)),
    startDelete: (owner, refs) => retry('delete outside object', () => startDeleteOutside(pool, owner, refs)),
    forget: (owner, refs) => retry('forget outside object', () => forgetOutside(pool, owner, refs)),
    adopt: (owner, refs, opts) => retry('adopt outside object', () => adoptOutside(pool, owner, refs, opts)),
  }
}

/** A snapshot a resource of the stack kept when it was deleted (deletion_policy: Snapshot). */
export type SnapshotRow = { key: string; snapshot_of: string; resource_name: string; state: string; created_at: Date }

/** A snapshot of the project, with the stack it was kept by (that stack may be deleted since). */
export type ProjectSnapshotRow = SnapshotRow & { stack_id: string; stack_name: string | null }

/** Every snapshot the project keeps, on every server, oldest first. */
export async function listProjectSnapshots(pool: pg.Pool, projectId: string): Promise<ProjectSnapshotRow[]> {
  const { rows } = await pool.query<ProjectSnapshotRow>(
    `SELECT o.key, o.snapshot_of, o.resource_name, o.state, o.created_at, o.stack_id, s.name AS stack_name
       FROM outside_object o LEFT JOIN stack s ON s.id = o.stack_id
      WHERE o.project_id = $1 AND o.kind = 'pg_database' AND o.snapshot_of IS NOT NULL ORDER BY o.created_at, o.key`,
    [projectId],
  )
  return rows
}

/** The record of snapshot `key` kept by a resource of the stack, of the project; null when it has none of that name. */
export async function findStackSnapshot(pool: pg.Pool, projectId: string, stackId: string, key: string): Promise<OutsideRecord | null> {
  const { rows } = await pool.query(
    `SELECT * FROM outside_object WHERE project_id = $1 AND stack_id = $2 AND key = $3 AND kind = 'pg_database' AND snapshot_of IS NOT NULL`,
    [projectId, stackId, key],
  )
  const row = rows[0] as Raw | undefined
  return row ? toRecord(row) : null
}

/** The stack's snapshots (of the project), oldest first. */
export async function listSnapshots(pool: pg.Pool, projectId: string, stackId: string): Promise<SnapshotRow[]> {
  const { rows } = await pool.query<SnapshotRow>(
    `SELECT key, snapshot_of, resource_name, state, created_at FROM outside_object
      WHERE stack_id = $1 AND project_id = $2 AND kind = 'pg_database' AND snapshot_of IS NOT NULL ORDER BY created_at, key`,
    [stackId, projectId],
  )
  return rows
}
