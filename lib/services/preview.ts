/**
 * Preview of an update: which resources it creates, updates in place,
 * replaces or deletes, with each one's property diff (before → after), and
 * what becomes of the outputs and conditions. Computed against the
 * *in-flight target* (the template the current traversal converges to), so
 * that a preview taken while an update runs describes what the new update
 * changes relative to where the stack is heading.
 *
 * The database is read here, in one snapshot (lib/db/queries/preview.ts);
 * the rest (checking the new template, building both definitions, deciding
 * as the engine decides: preview-model.ts) is template evaluation and runs on
 * an evaluation thread (lib/evaluation), under the budgets.
 */
import type { Db } from '../db/client'
import { readPreviewState, type PreviewState } from '../db/queries/preview'
import { evaluation } from '../evaluation/pool'
import type { PreviewOutcome, Task } from '../evaluation/tasks'
import type { StoredTemplate } from '../template/types'
import { NotFoundError } from '../plan/errors'
import { hiddenValues } from '../plan/secrets'
import { portable, type CheckContext, type Submission } from '../plan/template-check'

export type { PreviewAction, PreviewItem, PreviewResult } from '../plan/preview-types'

/** A preview, the submission as checked, and the snapshot it was computed against. */
export interface PreviewComputed extends PreviewOutcome {
  state: PreviewState
}

/** What the preview needs to know of a type: which of its attributes are secret. */
export type AttributeSecrecy = { get(name: string): { attributes: Record<string, { secret?: boolean }> } | undefined }

/**
 * Every form of every hidden value any template of the stack was given, the
 * secret forms the rows carry (values derived from secrets, attributes made
 * from them: a file's digest of secret content), and the values of secret
 * attributes (a handle's token): a property that read one holds it, and a
 * preview shows properties.
 */
function stackSecrets(state: PreviewState, types: AttributeSecrecy): string[] {
  const out = new Set<string>(state.rowSecretForms)
  for (const h of state.hidden) {
    const env = (h.environment ?? {}) as Record<string, Record<string, unknown> | undefined>
    hiddenValues(h.schemas as Parameters<typeof hiddenValues>[0], [h.parameters, env.parameters, env.parameter_defaults], out)
  }
  for (const r of state.rows) {
    const attributes = types.get(r.type)?.attributes ?? {}
    for (const [name, v] of Object.entries(r.attributes ?? {})) {
      if (!attributes[name]?.secret || v === null || v === undefined) continue
      if (typeof v === 'string' && v) out.add(v)
      else if (typeof v !== 'string') out.add(JSON.stringify(v))
    }
  }
  // Plain strings, longest first: they cross to an evaluation thread, where a Secrets object would lose its methods.
  return [...out].sort((a, b) => b.length - a.length)
}

/** Read what a preview compares against, then compare on an evaluation thread. */
export async function computeUpdatePreview(db: Db, stackId: string, sub: Submission | ((state: PreviewState) => Submission), check: CheckContext, types: AttributeSecrecy): Promise<PreviewComputed> {
  const state = await readPreviewState(db.pool, stackId)
  if (!state) throw new NotFoundError(`stack ${stackId} not found`)
  const t = state.target
  // The parsed JSON where one was stored (reading it back is cheaper than the text); `{}` for a delete.
  const parsed = t && Object.keys(t.template).length ? t.template : null
  const target: StoredTemplate | null = t ? { source: parsed ? null : t.source, parsed, environment: t.environment, parameters: t.parameters, stackName: state.stack.name, stackId: state.stack.id, projectId: state.stack.projectId } : null
  const submission = typeof sub === 'function' ? sub(state) : sub
  const task: Task = {
    kind: 'preview',
    sub: submission,
    ctx: portable(check),
    preview: { stack: state.stack, rows: state.rows, secrets: stackSecrets(state, types) },
    target,
  }
  const outcome = (await evaluation().run(task)) as PreviewOutcome
  return { ...outcome, state }
}
