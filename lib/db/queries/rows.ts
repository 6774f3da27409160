/** Mapping database rows (snake_case, as to_jsonb/pg return them) to engine types. */
import type { ClaimedJob, JobKind, ResourceRow } from '../../engine/ports'
import type { ResourceAction, ResourceStatus } from '../../engine/types'

type Raw = Record<string, unknown>

const date = (v: unknown): Date | null => (v === null || v === undefined ? null : v instanceof Date ? v : new Date(String(v)))
const obj = (v: unknown) => (v && typeof v === 'object' ? (v as Record<string, unknown>) : null)

export function toResourceRow(r: Raw): ResourceRow {
  return {
    id: Number(r.id),
    uuid: String(r.uuid),
    stackId: String(r.stack_id),
    name: String(r.name),
    type: String(r.type),
    action: r.action as ResourceAction,
    status: r.status as ResourceStatus,
    statusReason: String(r.status_reason ?? ''),
    physicalId: (r.physical_id as string | null) ?? null,
    currentTemplateId: (r.current_template_id as string | null) ?? null,
    requires: ((r.requires as number[] | null) ?? []).map(Number),
    replaces: r.replaces === null || r.replaces === undefined ? null : Number(r.replaces),
    replacedBy: r.replaced_by === null || r.replaced_by === undefined ? null : Number(r.replaced_by),
    properties: obj(r.properties),
    pendingProperties: obj(r.pending_properties),
    attributes: obj(r.attributes),
    data: obj(r.data),
    secretForms: Array.isArray(r.secret_forms) ? (r.secret_forms as string[]) : [],
    deletionPolicy: String(r.deletion_policy ?? 'Delete'),
    engineId: (r.engine_id as string | null) ?? null,
    lockTraversalId: (r.lock_traversal_id as string | null) ?? null,
    leaseExpiresAt: date(r.lease_expires_at),
  }
}

export function toClaimedJob(r: Raw): ClaimedJob {
  return {
    id: Number(r.id),
    kind: r.kind as JobKind,
    stackId: String(r.stack_id),
    projectId: String(r.project_id),
    traversalId: (r.traversal_id as string | null) ?? null,
    resourceId: r.resource_id === null || r.resource_id === undefined ? null : Number(r.resource_id),
    isUpdate: (r.is_update as boolean | null) ?? null,
    graphKeyId: r.graph_key_id === null || r.graph_key_id === undefined ? null : Number(r.graph_key_id),
    attempts: Number(r.attempts ?? 0),
  }
}
