/**
 * Updating a stack (also while an operation runs: the new traversal
 * supersedes it), and what an update would do (a preview, nothing written).
 */
import crypto from 'node:crypto'
import { setStackTags } from '../../db/queries/stacks'
import { insertTemplate } from '../../db/queries/templates'
import type { UpdateGuard } from '../edit-guard'
import { computeUpdatePreview, type PreviewResult } from '../preview'
import { checkSubmission } from '../templates'
import { refuseUpdate, type GuardSystem } from './guards'
import { findOwnStack, startOperation } from './shared'
import { checkContext, submissionFor, submissionFrom } from './submission'
import type { Actor, OperationResult, StackResources, UpdateRequest } from './types'

export class UpdateSystem {
  constructor(private readonly options: { resources: StackResources; guards: GuardSystem }) {}

  /**
   * Update a stack (also while an operation runs: the new traversal supersedes it). With
   * `guard.expect`, only if the stack is still at the template version the edit was written
   * against (409 with what changed, otherwise); with `guard.skipUnchanged`, an unchanged
   * submission starts nothing and answers `noChanges`.
   */
  async update(actor: Actor, ref: string, req: UpdateRequest, guard: UpdateGuard = {}): Promise<OperationResult> {
    const { resources, guards } = this.options
    const { pool } = resources.db
    const stack = await findOwnStack(pool, actor, ref)
    refuseUpdate(stack)
    const expected = await guards.expected(stack, guard)
    // Preempting a running operation compares its template with this one, resource by resource.
    const preempting = req.preempt === true && stack.status === 'IN_PROGRESS' && stack.rawTemplateId !== null
    const checked = await checkSubmission(await submissionFor(pool, stack, req), { ...checkContext(resources, actor, stack), fingerprints: preempting })
    await guards.refuseSubmission(stack, req, checked)
    if (await guards.unchanged(stack, req, checked, guard)) {
      return { stack: { id: stack.id, name: stack.name }, traversalId: null, action: 'UPDATE', superseded: null, noChanges: true }
    }
    const preempt = preempting ? await guards.preemptTargets(stack, checked.plan) : undefined
    const templateId = crypto.randomUUID()
    try {
      const started = await startOperation(
        pool,
        {
          stackId: stack.id,
          action: 'UPDATE',
          rawTemplateId: templateId,
          plan: checked.plan,
          startedBy: actor.name,
          timeoutMins: req.timeoutMins,
          disableRollback: req.disableRollback,
          converge: req.converge === true,
          ...(preempt ? { preempt } : {}),
          // The version was checked above (and the preempted traversal read): the start commits only if no other operation started since.
          ...(expected || preempt ? { expectTraversalId: stack.currentTraversalId } : {}),
          before: async (c) => {
            await insertTemplate(c, stack.id, { id: templateId, source: checked.source, templateText: checked.templateText, environment: checked.environmentJson, parameters: checked.parameters })
            if (req.tags) await setStackTags(c, stack.id, req.tags)
          },
        },
        stack,
        'UPDATE',
      )
      return { ...started, templateId }
    } catch (err) {
      throw await guards.staleAfter(err, expected, () => findOwnStack(pool, actor, stack.id))
    }
  }

  /** What an update would do, against the in-flight target (nothing is written). */
  async preview(actor: Actor, ref: string, req: UpdateRequest): Promise<PreviewResult> {
    const { resources } = this.options
    const stack = await findOwnStack(resources.db.pool, actor, ref)
    const computed = await computeUpdatePreview(resources.db, stack.id, (state) => submissionFrom(state.target, req), checkContext(resources, actor, stack), resources.types)
    return computed.preview
  }
}
