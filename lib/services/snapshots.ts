/**
 * The snapshots a project keeps (deletion_policy: Snapshot): listed for the
 * whole project, and deleted on request. They count against the project's
 * quotas (KILN_PROJECT_MAX_SNAPSHOTS, KILN_PROJECT_DATABASE_QUOTA_BYTES), and
 * deleting one is how a project makes room. A stack's own list is
 * ReadService.snapshots.
 *
 * A delete runs here, in the web process, through the type that took the
 * snapshot (ResourceType.deleteSnapshot), as the row that took it: a snapshot
 * outlives its row, and no worker holds it. A snapshot a restore is copying,
 * or one being taken, is not deleted (409); the type holds it meanwhile.
 */
import type { Db } from '../db/client'
import { findStackSnapshot, listProjectSnapshots, outsideObjectStore } from '../db/queries/outside-objects'
import { bindOutsideObjects } from '../engine/check-resource'
import type { Logger } from '../logger'
import type { OutsideRecord, ResourceContext, ResourceType, ResourceTypeConfig } from '../resources/types'
import { outsideRun } from '../resources/outside-run'
import { ConflictError, NotFoundError } from '../plan/errors'
import type { ReadService } from './reads'
import type { Actor } from './stacks'

/** How long a delete may take on the target server (a large snapshot's files are removed). */
const DELETE_MS = 60_000

export interface SnapshotDeps {
  db: Db
  types: { list(): ResourceType[] }
  /** Where the type finds the snapshots (the target server); without it nothing can be deleted. */
  typeConfig?: ResourceTypeConfig
  reads: Pick<ReadService, 'stackRow'>
  log: Logger
}

export interface SnapshotView {
  name: string
  /** The database it is a copy of. */
  of: string
  stackId: string
  /** null once the stack is deleted. */
  stackName: string | null
  resource: string
  state: string
  takenAt: string
}

export type SnapshotService = ReturnType<typeof createSnapshotService>

export function createSnapshotService(deps: SnapshotDeps) {
  const pool = deps.db.pool
  const objects = outsideObjectStore(pool, (_what, fn) => fn())

  /** The row that took the snapshot, as the type sees it: its records are bound to that row. */
  function context(record: OutsideRecord, config: ResourceTypeConfig): ResourceContext {
    const owner = { projectId: record.projectId, stackId: record.stackId, resourceName: record.resourceName, resourceUuid: record.resourceUuid }
    return {
      ...owner,
      ...outsideRun('a snapshot delete'),
      stackName: '',
      replacesUuid: null,
      physicalName: record.key,
      signal: AbortSignal.timeout(DELETE_MS),
      log: deps.log,
      config,
      objects: bindOutsideObjects(objects, owner),
    }
  }

  return {
    /** Every snapshot of the project, of live and deleted stacks, oldest first. */
    async list(actor: Actor): Promise<SnapshotView[]> {
      const rows = await listProjectSnapshots(pool, actor.projectId)
      return rows.map((r) => ({
        name: r.key,
        of: r.snapshot_of,
        stackId: r.stack_id,
        stackName: r.stack_name,
        resource: r.resource_name,
        state: r.state,
        takenAt: r.created_at.toISOString(),
      }))
    },

    /** Delete snapshot `name` that a resource of the stack kept; 404 when the stack (of the project) kept none of that name. */
    async delete(actor: Actor, stackRef: string, name: string): Promise<void> {
      const stack = await deps.reads.stackRow(actor, stackRef)
      const record = await findStackSnapshot(pool, actor.projectId, String(stack.id), name)
      if (!record) throw new NotFoundError(`snapshot ${name} not found`)
      // Snapshots are databases (outside_object kind pg_database); the one type that takes them deletes them.
      const type = deps.types.list().find((t) => t.deleteSnapshot)
      if (!type?.deleteSnapshot || !deps.typeConfig) throw new Error('no resource type or target server is configured to delete snapshots')
      const out = await type.deleteSnapshot(context(record, deps.typeConfig), name)
      if (out.outcome === 'busy') throw new ConflictError(out.reason)
    },
  }
}
