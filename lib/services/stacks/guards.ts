/**
 * The checks before a stack operation starts: whether the stack's state
 * allows it (conflicts), whether an update was written against the version
 * the stack is at (lib/services/edit-guard.ts), whether the submission keeps
 * Heat's rules for immutable parameters and external_id, whether it changes
 * anything, and which in-flight actions a preempting update stops.
 */
import { isDeepStrictEqual } from 'node:util'
import { heldRowData } from '../../db/queries/resources'
import { immutableParameters } from '../../db/queries/templates'
import type { VersionRef } from '../../db/queries/versions'
import { adoptionOf, externalIdRefusal } from '../../engine/adoption'
import { changedTargets } from '../../engine/preempt'
import type { TraversalPlan } from '../../engine/types'
import { ConflictError, ValidationError } from '../../plan/errors'
import type { CheckedSubmission } from '../../plan/template-check'
import { expectedVersion, isUnchanged, staleConflict, type UpdateGuard } from '../edit-guard'
import { storedDefinition, storedPlan } from './shared'
import { refuseUnknownClearParameters } from './submission'
import type { StackRecord, StackResources, UpdateRequest } from './types'

/** An update of a stack that is being deleted is refused. */
export function refuseUpdate(stack: StackRecord): void {
  if (stack.action === 'DELETE') throw new ConflictError(`stack ${stack.name} is being deleted; it cannot be updated`)
}

/** Only a running operation can be cancelled, never a delete; with rollback, only one that has something to roll back. */
export function refuseCancel(stack: StackRecord, opts: { rollback: boolean }): void {
  if (stack.status !== 'IN_PROGRESS') throw new ConflictError(`stack ${stack.name} is ${stack.action}_${stack.status}: there is nothing to cancel`)
  if (stack.action === 'DELETE') throw new ConflictError('a delete cannot be cancelled')
  if (!opts.rollback) return
  if (stack.action === 'ROLLBACK') throw new ConflictError('the stack is already rolling back')
  if (stack.action === 'CHECK' || stack.action === 'DRIFT') throw new ConflictError(`a ${stack.action === 'CHECK' ? 'check' : 'drift check'} has nothing to roll back; cancel it without rollback`)
}

/** A deleted stack, or one already at its last good template, is not rolled back. */
export function refuseRollback(stack: StackRecord): void {
  if (stack.action === 'DELETE') throw new ConflictError('a deleted stack cannot be rolled back')
  if (stack.status === 'COMPLETE' && stack.action !== 'ROLLBACK') {
    if (!stack.lastGoodTemplateId || stack.lastGoodTemplateId === stack.rawTemplateId) throw new ConflictError('the stack is already at its last good template')
  }
}

/** A check or a drift check waits for the running operation, and needs a template to look with. */
export function refuseLook(stack: StackRecord, action: 'CHECK' | 'DRIFT'): asserts stack is StackRecord & { rawTemplateId: string } {
  const what = action === 'CHECK' ? 'check it' : 'check its drift'
  if (stack.status === 'IN_PROGRESS') throw new ConflictError(`stack ${stack.name} is ${stack.action}_IN_PROGRESS; ${what} when it is done`)
  if (!stack.rawTemplateId) throw new ConflictError('the stack has no template')
}

/** The checks of an update that read the database: the version it was written against, the submission's rules, what it changes. */
export class GuardSystem {
  constructor(private readonly resources: Pick<StackResources, 'db'>) {}

  /**
   * The version `guard.expect` names (null: none named); a 409 with what changed
   * meanwhile when the stack has moved to another template since.
   */
  async expected(stack: StackRecord, guard: UpdateGuard): Promise<VersionRef | null> {
    const { db } = this.resources
    const expected = guard.expect !== undefined ? await expectedVersion(db, stack, guard.expect, guard.expectFrom) : null
    if (expected && expected.templateId !== stack.rawTemplateId) throw await staleConflict(db, stack, expected)
    return expected
  }

  /**
   * What to throw when an update's start failed with `err` after its version was checked: a 409 with
   * what changed if the stack (read again) moved to another template meanwhile, else `err` itself.
   */
  async staleAfter(err: unknown, expected: VersionRef | null, reread: () => Promise<StackRecord>): Promise<unknown> {
    if (!(expected && err instanceof ConflictError)) return err
    const now = await reread()
    if (now.rawTemplateId === expected.templateId) return err
    return staleConflict(this.resources.db, now, expected)
  }

  /** Heat's rules a checked submission must keep against the stack: external_id, clear_parameters, immutable parameters. */
  async refuseSubmission(stack: StackRecord, req: UpdateRequest, checked: CheckedSubmission): Promise<void> {
    await this.refuseExternalChanges(stack, checked.plan)
    refuseUnknownClearParameters(req, checked)
    await this.refuseImmutableChanges(stack, checked.parameterValues, checked.summary.parameters.map((p) => p.name))
  }

  /**
   * With `guard.skipUnchanged`, whether the submission is what the stack already converges to.
   * Converge looks at the objects and new tags change the stack: neither is "no changes".
   */
  async unchanged(stack: StackRecord, req: UpdateRequest, checked: CheckedSubmission, guard: UpdateGuard): Promise<boolean> {
    const skippable = guard.skipUnchanged && req.converge !== true && req.tags === undefined
    return Boolean(skippable) && (await isUnchanged(this.resources.db, stack, checked, req))
  }

  /** The resources whose targets an update changes from those of the running traversal (lib/engine/preempt.ts). */
  async preemptTargets(stack: StackRecord, plan: TraversalPlan): Promise<string[]> {
    const running = await storedPlan(this.resources.db.pool, stack, stack.rawTemplateId!, { fingerprints: true })
    return changedTargets({ dependsOn: running.dependsOn, fingerprints: running.fingerprints ?? {} }, { dependsOn: plan.dependsOn, fingerprints: plan.fingerprints ?? {} })
  }

  /**
   * Heat's `immutable` parameters: an update that gives one of the current
   * template's immutable parameters another value is refused (Heat's
   * ImmutableParameterModified), a 400 naming each (never its value).
   */
  private async refuseImmutableChanges(stack: StackRecord, values: Record<string, unknown>, names: string[]): Promise<void> {
    const { pool } = this.resources.db
    if (!stack.rawTemplateId) return
    const immutable = (await immutableParameters(pool, stack.rawTemplateId)).filter((n) => names.includes(n))
    if (!immutable.length) return
    const before = (await storedDefinition(pool, stack, stack.rawTemplateId)).definition.parameters
    const changed = immutable.filter((n) => !isDeepStrictEqual(before[n] ?? null, values[n] ?? null)).sort()
    if (!changed.length) return
    const issues = changed.map((n) => ({ code: 'parameter' as const, path: `parameters.${n}`, line: null, column: null, message: `parameter ${n} is immutable and may not be updated` }))
    throw new ValidationError(`The following parameters are immutable and may not be updated: ${changed.join(', ')}`, issues)
  }

  /**
   * Heat's rules for external_id, checked before an update starts (the engine
   * keeps them too): it cannot be added to a resource Kiln manages nor
   * changed, and an adopted resource cannot be updated while it is set. Each
   * refusal is a 400 naming the resource's external_id.
   */
  private async refuseExternalChanges(stack: StackRecord, plan: TraversalPlan): Promise<void> {
    const external = plan.external ?? {}
    const names = Object.keys(external)
    if (!names.length) return
    const rows = await heldRowData(this.resources.db.pool, stack.id, names)
    const issues = rows.flatMap((r) => {
      const e = external[String(r.name)]!
      const why = externalIdRefusal(String(r.name), adoptionOf(r.data), e.externalId, e.fingerprint)
      return why ? [{ code: 'structure' as const, path: `resources.${String(r.name)}.external_id`, line: null, column: null, message: why }] : []
    })
    if (issues.length) throw new ValidationError(issues.map((i) => `${i.path}: ${i.message}`).join('; '), issues)
  }
}
