/** A page of the stack's events, in sequence order, secrets redacted. */
import { eventsPage } from '../../db/queries/events'
import { redact } from '../../plan/secrets'
import type { Actor } from '../stacks/types'
import type { SecretSystem } from './secrets'
import { iso, stackRow, type ReadResources } from './shared'

export interface EventQuery {
  after?: number
  limit: number
  resource?: string
  /** A traversal id, or `current`: the stack's current traversal. */
  traversal?: string
}

export class EventReadSystem {
  constructor(private readonly options: { resources: ReadResources; secrets: SecretSystem }) {}

  async events(actor: Actor, ref: string, q: EventQuery) {
    const { resources, secrets: stackSecrets } = this.options
    const s = await stackRow(resources, actor, ref)
    // `current` is resolved from the same stack row as lastSeq, so the answer says which traversal it is.
    const traversal = q.traversal === 'current' ? ((s.current_traversal_id as string | null) ?? null) : q.traversal
    if (q.traversal === 'current' && traversal === null) return { stackId: String(s.id), lastSeq: Number(s.last_seq), traversalId: null, events: [] }
    const rows = await eventsPage(resources.pool, String(s.id), { ...q, after: q.after ?? 0, ...(traversal ? { traversal } : {}) })
    const secrets = rows.length ? await stackSecrets.of(s.id) : []
    const events = rows.map((r) => ({
      seq: Number(r.seq),
      traversalId: (r.traversal_id as string | null) ?? null,
      kind: String(r.kind),
      resourceId: r.resource_id === null ? null : Number(r.resource_id),
      resourceName: (r.resource_name as string | null) ?? null,
      physicalId: (r.physical_id as string | null) ?? null,
      action: (r.action as string | null) ?? null,
      status: (r.status as string | null) ?? null,
      reason: redact(String(r.reason), secrets),
      data: redact((r.data as Record<string, unknown> | null) ?? null, secrets),
      at: iso(r.created_at)!,
    }))
    return { stackId: String(s.id), lastSeq: Number(s.last_seq), ...(q.traversal ? { traversalId: traversal ?? null } : {}), events }
  }
}
