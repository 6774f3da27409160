/**
 * What a preview (or a saved plan) is computed against, read in one
 * snapshot: the stack (its current traversal and template), that template,
 * the live resource rows with their versions (atomic_key), and the hidden
 * parameters of every template the stack had and the secret forms the rows
 * carry (their values are masked wherever a preview shows a value).
 */
import type pg from 'pg'
import type { ResourceAction, ResourceStatus } from '../../engine/types'
import { withTransaction } from '../client'
import { hiddenParameterTemplates } from './templates'
import type { PreviewStateRow } from '../../plan/preview-model'

export interface StoredTemplateRow {
  id: string
  source: string
  template: Record<string, unknown>
  environment: Record<string, unknown>
  parameters: Record<string, unknown>
}

export interface PreviewState {
  stack: { id: string; name: string; projectId: string; status: string; action: string; currentTraversalId: string | null; rawTemplateId: string | null }
  target: StoredTemplateRow | null
  rows: PreviewStateRow[]
  /** Templates of the stack with hidden parameters: their schemas and the values they were given. */
  hidden: { schemas: unknown; parameters: Record<string, unknown> | null; environment: Record<string, unknown> | null }[]
  /** The secret forms the rows carry (resource.secret_forms: derived from secrets, their attributes made from them). */
  rowSecretForms: string[]
}

const obj = (v: unknown) => (v && typeof v === 'object' ? (v as Record<string, unknown>) : null)

/** Null when the stack is gone. */
export async function readPreviewState(pool: pg.Pool, stackId: string): Promise<PreviewState | null> {
  return withTransaction(pool, async (c) => {
    await c.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY')
    const { rows: stacks } = await c.query('SELECT id, name, project_id, status, action, current_traversal_id, raw_template_id FROM stack WHERE id = $1 AND deleted_at IS NULL', [stackId])
    const s = stacks[0]
    if (!s) return null
    const t = s.raw_template_id
      ? (await c.query('SELECT id, source, template, environment, parameters FROM raw_template WHERE id = $1', [s.raw_template_id])).rows[0]
      : null
    const { rows } = await c.query(
      `SELECT id, name, type, action, status, physical_id, properties, attributes, data, current_template_id, requires, replaces, replaced_by,
              deletion_policy, updated_at, atomic_key, secret_forms
         FROM resource WHERE stack_id = $1 AND NOT (action = 'DELETE' AND status = 'COMPLETE') ORDER BY id`,
      [stackId],
    )
    const hidden = await hiddenParameterTemplates(c, stackId)
    return {
      stack: { id: String(s.id), name: String(s.name), projectId: String(s.project_id), status: String(s.status), action: String(s.action), currentTraversalId: s.current_traversal_id ?? null, rawTemplateId: s.raw_template_id ?? null },
      target: t ? { id: String(t.id), source: String(t.source), template: obj(t.template) ?? {}, environment: obj(t.environment) ?? {}, parameters: obj(t.parameters) ?? {} } : null,
      rows: rows.map((r) => ({
        id: Number(r.id),
        name: String(r.name),
        type: String(r.type),
        action: r.action as ResourceAction,
        status: r.status as ResourceStatus,
        physicalId: r.physical_id ?? null,
        properties: obj(r.properties),
        attributes: obj(r.attributes),
        data: obj(r.data),
        currentTemplateId: r.current_template_id ?? null,
        requires: ((r.requires as number[] | null) ?? []).map(Number),
        replaces: r.replaces === null ? null : Number(r.replaces),
        replacedBy: r.replaced_by === null ? null : Number(r.replaced_by),
        deletionPolicy: String(r.deletion_policy),
        updatedAt: new Date(r.updated_at).getTime(),
        atomicKey: Number(r.atomic_key),
      })),
      hidden: hidden.map((h) => ({ schemas: h.schemas, parameters: obj(h.parameters), environment: obj(h.environment) })),
      rowSecretForms: [...new Set(rows.flatMap((r) => (r.secret_forms as string[] | null) ?? []))],
    }
  })
}
