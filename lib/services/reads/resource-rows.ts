/**
 * A stack's resource rows as shown: who holds each row's lock, its drift
 * finding, its description from the template, secret values masked; and the
 * snapshots its deleted resources kept.
 */
import { listSnapshots } from '../../db/queries/outside-objects'
import { listResources } from '../../db/queries/resources'
import { templateResources } from '../../db/queries/templates'
import type { DriftState } from '../../engine/drift'
import { NIL_UUID } from '../../ids'
import { redact } from '../../plan/secrets'
import type { Actor } from '../stacks/types'
import type { DriftReadSystem } from './drift'
import { maskAttributes, maskProperties } from './masking'
import type { SecretSystem } from './secrets'
import { iso, stackRow, type ReadResources } from './shared'

/** Who holds a row's lock: a worker (with its lease), or a parked node (no worker: held while its action waits). */
function lockOf(r: Record<string, unknown>) {
  if (!r.engine_id) return null
  const parked = r.engine_id === NIL_UUID
  return {
    worker: parked ? null : String(r.engine_id),
    workerName: (r.worker_name as string | null) ?? null,
    traversalId: (r.lock_traversal_id as string | null) ?? null,
    leaseExpiresAt: iso(r.lease_expires_at),
    parked,
  }
}

/** A row's drift as the resource listing shows it (null: no current finding). */
function rowDrift(d: { state: DriftState; changes: unknown[]; problems: string[]; observedAt: string } | undefined, traversalId: string | undefined) {
  return d && traversalId ? { state: d.state, changes: d.changes, problems: d.problems, observedAt: d.observedAt, traversalId } : null
}

export class ResourceRowSystem {
  constructor(private readonly options: { resources: ReadResources; secrets: SecretSystem; drift: DriftReadSystem }) {}

  /**
   * The stack's resource rows (`all`: deleted ones too; `id`: that row alone, deleted or not).
   * A show of one resource (`id`, or `requested`: its name) shows the attributes its type shows on request.
   */
  async resources(actor: Actor, ref: string, opts: { all?: boolean; id?: number; requested?: string } = {}) {
    const { resources, secrets, drift: drifts } = this.options
    const { pool, registry } = resources
    const s = await stackRow(resources, actor, ref)
    const known = await secrets.of(s.id)
    // The latest drift check's finding per row, while no later operation may have changed the rows.
    const drift = await drifts.latest(s.id, known)
    const driftOfRow = new Map(drift?.current ? drift.resources.map((d) => [d.resourceId, d]) : [])
    // A resource's `description` (a key of its definition) as the stack's template gives it.
    const defs = ((await templateResources(pool, (s.raw_template_id as string | null) ?? null)) ?? {}) as Record<string, { description?: unknown } | null>
    const descriptionOf = (name: string) => {
      const d = Object.hasOwn(defs, name) ? defs[name]?.description : undefined
      return typeof d === 'string' ? redact(d, known) : ''
    }
    const rows = await listResources(pool, String(s.id), opts)
    return rows.map((r) => ({
      id: Number(r.id),
      uuid: String(r.uuid),
      name: String(r.name),
      type: String(r.type),
      action: String(r.action),
      status: String(r.status),
      statusReason: redact(String(r.status_reason), known),
      description: descriptionOf(String(r.name)),
      physicalId: (r.physical_id as string | null) ?? null,
      properties: maskProperties(registry, String(r.type), r.properties, known),
      attributes: maskAttributes(registry, String(r.type), r.attributes, known, opts.id !== undefined || opts.requested === String(r.name)),
      requires: (r.requires as number[]) ?? [],
      replaces: (r.replaces as number | null) ?? null,
      replacedBy: (r.replaced_by as number | null) ?? null,
      current: r.current_template_id !== null && r.current_template_id === s.raw_template_id,
      lock: lockOf(r),
      waiter: r.waiter_traversal_id ? { traversalId: String(r.waiter_traversal_id), isUpdate: Boolean(r.waiter_is_update) } : null,
      lastTraversalId: (r.last_traversal_id as string | null) ?? null,
      drift: rowDrift(driftOfRow.get(Number(r.id)), drift?.traversalId),
      createdAt: iso(r.created_at)!,
      updatedAt: iso(r.updated_at)!,
    }))
  }

  /**
   * The snapshots the stack's resources kept when they were deleted (deletion_policy: Snapshot), also once
   * the stack is deleted (by its id): each restorable into a new database of the project (from_snapshot).
   */
  async snapshots(actor: Actor, ref: string) {
    const { resources } = this.options
    const s = await stackRow(resources, actor, ref)
    const rows = await listSnapshots(resources.pool, actor.projectId, String(s.id))
    return rows.map((r) => ({ name: String(r.key), of: String(r.snapshot_of), resource: String(r.resource_name), state: String(r.state), takenAt: iso(r.created_at)! }))
  }
}
