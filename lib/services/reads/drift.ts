/** The stack's latest drift check, as shown: what each resource's type found, secrets masked. */
import { latestDrift } from '../../db/queries/drift'
import type { DriftState } from '../../engine/drift'
import { NotFoundError } from '../../plan/errors'
import { redact, type Secrets } from '../../plan/secrets'
import type { Actor } from '../stacks/types'
import { maskChanges } from './masking'
import type { SecretSystem } from './secrets'
import { iso, stackRow, type ReadResources } from './shared'

export class DriftReadSystem {
  constructor(private readonly options: { resources: ReadResources; secrets: SecretSystem }) {}

  /** The latest drift check of the stack (`GET /api/stacks/{stack}/drift`). */
  async drift(actor: Actor, ref: string) {
    const { resources, secrets } = this.options
    const s = await stackRow(resources, actor, ref)
    const d = await this.latest(s.id, await secrets.of(s.id))
    if (!d) throw new NotFoundError(`no drift check has run on stack ${String(s.name)}; start one with POST /api/stacks/{stack}/drift`)
    return { stackId: String(s.id), stackName: String(s.name), ...d }
  }

  /** The stack's latest drift check, as shown (masked), or null if none ran. */
  async latest(stackId: unknown, secrets: Secrets) {
    const { pool, registry } = this.options.resources
    const d = await latestDrift(pool, String(stackId))
    if (!d) return null
    const resources = d.results.map((r) => ({
      name: r.resourceName,
      resourceId: r.resourceId,
      type: r.type,
      physicalId: r.physicalId,
      state: r.state as DriftState,
      changes: maskChanges(registry, r.type, r.changes, secrets),
      problems: r.problems.map((p) => redact(p, secrets)),
      observedAt: iso(r.observedAt)!,
    }))
    const count = (s: DriftState) => resources.filter((r) => r.state === s).length
    return {
      traversalId: d.traversal.id,
      status: d.traversal.outcome ?? 'IN_PROGRESS',
      statusReason: redact(d.traversal.outcomeReason, secrets),
      startedBy: d.traversal.startedBy,
      startedAt: iso(d.traversal.startedAt)!,
      endedAt: iso(d.traversal.endedAt),
      current: d.current,
      summary: { inSync: count('IN_SYNC'), modified: count('MODIFIED'), deleted: count('DELETED'), notChecked: count('NOT_CHECKED') },
      resources,
    }
  }
}
