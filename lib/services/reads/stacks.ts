/**
 * Stacks as shown: the project's list (a page at a time), one stack with its
 * settings and masked parameters (and its outputs, unless the caller needs
 * the stack alone), its template, and the workers its events name.
 */
import { listStacks, stackProgress } from '../../db/queries/stacks'
import { templateHeading } from '../../db/queries/templates'
import { workersByIds } from '../../db/queries/workers'
import { NotFoundError, ValidationError } from '../../plan/errors'
import { redact } from '../../plan/secrets'
import type { Actor } from '../stacks/types'
import { maskedParameters, maskEnvironment } from './masking'
import type { OutputSystem } from './outputs'
import type { SecretSystem } from './secrets'
import { iso, stackRow, templateOf, type ReadResources } from './shared'

export interface StackSummary {
  id: string
  name: string
  action: string
  status: string
  statusReason: string
  createdAt: string
  updatedAt: string | null
  currentTraversalId: string | null
  tags: string[]
  progress: { total: number; done: number; running: number; blocked: number; failed: number } | null
}

export interface ListQuery {
  status?: string
  name?: string
  limit: number
  /** Opaque cursor: the last (created_at, id) seen. */
  marker?: string
  includeProgress?: boolean
}

function summary(r: Record<string, unknown>): StackSummary {
  return {
    id: String(r.id),
    name: String(r.name),
    action: String(r.action),
    status: String(r.status),
    statusReason: String(r.status_reason),
    createdAt: iso(r.created_at)!,
    updatedAt: iso(r.updated_at),
    currentTraversalId: (r.current_traversal_id as string | null) ?? null,
    tags: (r.tags as string[]) ?? [],
    progress: r.total === undefined || r.total === null ? null : { total: Number(r.total), done: Number(r.done), running: Number(r.running), blocked: Number(r.blocked), failed: Number(r.failed) },
  }
}

export class StackReadSystem {
  constructor(private readonly options: { resources: ReadResources; secrets: SecretSystem; outputs: OutputSystem }) {}

  /** A stack of the actor's project by id or name, as stored (the other reads start from it). */
  stackRow(actor: Actor, ref: string): Promise<Record<string, unknown>> {
    return stackRow(this.options.resources, actor, ref)
  }

  async list(actor: Actor, q: ListQuery): Promise<{ stacks: StackSummary[]; next: string | null }> {
    let after: { at: string; id: string } | undefined
    if (q.marker) {
      const [at, id] = Buffer.from(q.marker, 'base64url').toString().split('|')
      if (!at || !id || Number.isNaN(Date.parse(at))) throw new ValidationError('invalid marker')
      after = { at, id }
    }
    const rows = await listStacks(this.options.resources.pool, actor.projectId, { status: q.status?.toUpperCase(), name: q.name, limit: q.limit + 1, after })
    const page = rows.slice(0, q.limit)
    const last = page.at(-1)
    return {
      stacks: page.map(summary),
      next: rows.length > q.limit && last ? Buffer.from(`${new Date(last.created_at).toISOString()}|${last.id}`).toString('base64url') : null,
    }
  }

  async show(actor: Actor, ref: string) {
    const s = await this.stackRow(actor, ref)
    return { ...(await this.details(s)), outputs: await this.options.outputs.of(s) }
  }

  /** The stack without its outputs (resolving them evaluates the template): what the live view asks for. */
  async showSummary(actor: Actor, ref: string) {
    return this.details(await this.stackRow(actor, ref))
  }

  async template(actor: Actor, ref: string) {
    const s = await this.stackRow(actor, ref)
    const t = await templateOf(this.options.resources, (s.raw_template_id as string | null) ?? null)
    if (!t) throw new NotFoundError('the stack has no template')
    // The template (its text and defaults) is returned as written, as Heat does; values given with requests are not.
    return { source: String(t.source), template: t.template as Record<string, unknown>, environment: maskEnvironment(t, await this.options.secrets.of(s.id)), parameters: maskedParameters(t) }
  }

  /**
   * Names (`hostname:pid`) of the workers the stack's events name, by id: the
   * page shows lock holders with them. Only ids asked for (from those events)
   * are answered: what machines run the workers is not every member's
   * business (the health details are an admin's).
   */
  async workers(actor: Actor, ref: string, ids: string[]) {
    await this.stackRow(actor, ref)
    const rows = await workersByIds(this.options.resources.pool, ids)
    return rows.map((w) => ({ id: String(w.id), name: `${w.hostname}:${w.pid}`, state: String(w.state), stoppedAt: iso(w.stopped_at) }))
  }

  /** A stack as shown, but for its outputs. Of its template, only the description and parameters are read (not the text, not every resource). */
  private async details(s: Record<string, unknown>) {
    const { resources, secrets } = this.options
    const progress = await stackProgress(resources.pool, String(s.id))
    const t = await templateHeading(resources.pool, (s.raw_template_id as string | null) ?? null)
    const known = await secrets.of(s.id)
    return {
      ...summary({ ...s, ...progress, status_reason: redact(String(s.status_reason), known) }),
      projectId: String(s.project_id),
      description: typeof t?.template?.description === 'string' ? (t.template.description as string) : '',
      timeoutMins: Number(s.timeout_mins),
      disableRollback: Boolean(s.disable_rollback),
      templateId: (s.raw_template_id as string | null) ?? null,
      parameters: maskedParameters(t),
      deletedAt: iso(s.deleted_at),
      lastSeq: Number(s.last_seq),
    }
  }
}
