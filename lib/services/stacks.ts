/**
 * Stack operations: the one path from the API, the UI, the CLI and the worker
 * to the data. Each starts a traversal (lib/db/queries/traversal.ts) in one
 * transaction; nothing waits for the traversal to finish.
 *
 *   create · update (also while IN_PROGRESS: supersedes) · cancel (with or
 *   without rollback) · delete (also while IN_PROGRESS: aborts in-flight
 *   actions) · rollback · check · drift (a check of every object against what
 *   was stored) · rollbackAfterFailure (worker)
 */
import crypto from 'node:crypto'
import { isDeepStrictEqual } from 'node:util'
import type { Db } from '../db/client'
import { findStack, insertStackWithTemplate, liveStackById, setStackTags, type StackRecord } from '../db/queries/stacks'
import { heldRowData } from '../db/queries/resources'
import { immutableParameters, insertTemplate, templateById, templateInputs } from '../db/queries/templates'
import { startTraversal, stopTraversal, type StartTraversalInput } from '../db/queries/traversal'
import type { TraversalPlan } from '../engine/types'
import { adoptionOf, externalIdRefusal } from '../engine/adoption'
import { changedTargets } from '../engine/preempt'
import type { StackAction } from '../engine/types'
import { definitionOf } from '../evaluation/bounded'
import { BudgetExceeded } from '../template/budget'
import type { TypeCatalog } from '../template/types'
import { ConflictError, NotFoundError, ValidationError } from '../plan/errors'
import type { ResourceType } from '../resources/types'
import type { StoredTemplateRow } from '../db/queries/preview'
import { expectedVersion, isUnchanged, staleConflict, type UpdateGuard } from './edit-guard'
import { computeUpdatePreview, type PreviewResult } from './preview'
import { budgetError, EMPTY_TEMPLATE_SOURCE, planFor, type CheckContext, type Limits, type Submission } from '../plan/template-check'
import { checkSubmission } from './templates'
import { UUID } from '../ids'

export interface Actor {
  projectId: string
  /** Who asked (token name), recorded on the traversal. */
  name: string
}

export interface ServiceDeps {
  db: Db
  catalog: TypeCatalog
  /** Resource types (property schemas for previews). */
  types: { get(name: string): ResourceType | undefined }
  limits: Limits
  defaultTimeoutMins: number
}

export type { StackRecord }

export interface OperationResult {
  stack: { id: string; name: string }
  traversalId: string | null
  action: StackAction | 'CANCEL'
  /** The traversal this one superseded, if a traversal was running. */
  superseded: string | null
  /** The submission is what the stack already converges to: nothing was started. */
  noChanges?: true
  /** An update's new template version (what GET's ETag names from now on). */
  templateId?: string
}

export interface CreateRequest extends Submission {
  name: string
  timeoutMins?: number
  disableRollback?: boolean
  tags?: string[]
}

export interface UpdateRequest extends Partial<Submission> {
  /**
   * Abort the in-flight actions of the traversal this update supersedes on the resources whose targets it
   * changes (their AbortSignal fires); this update then observes and converges what they leave.
   */
  preempt?: boolean
  /** PATCH semantics: reuse the current template and parameters; given parameters override. */
  existing?: boolean
  /** Heat's `converge`: observe each resource and compare the new definition with it as it is, not as stored. */
  converge?: boolean
  /** Heat's `clear_parameters` (PATCH): stored parameter values to drop, so that these parameters take their defaults again. */
  clearParameters?: string[]
  /** The stack's tags from now on (omitted: kept). */
  tags?: string[]
  timeoutMins?: number
  disableRollback?: boolean
}

const STACK_NAME = /^[a-zA-Z][a-zA-Z0-9_.-]{0,254}$/

/**
 * The submission an update, a preview or a plan means, given the stack's current template:
 * PATCH semantics (`existing`, or no template) reuse it and its parameters; given ones override.
 */
export function submissionFrom(current: Pick<StoredTemplateRow, 'source' | 'environment' | 'parameters'> | null, req: UpdateRequest): Submission {
  if (req.template && !req.existing) return { template: req.template, environment: req.environment, parameters: req.parameters }
  if (!current) throw new ConflictError('the stack has no template to reuse')
  // Heat's clear_parameters: the stored values (request and environment `parameters`) of these go, back to their defaults.
  const cleared = new Set(req.clearParameters ?? [])
  const keep = (o: Record<string, unknown> | undefined) => Object.fromEntries(Object.entries(o ?? {}).filter(([k]) => !cleared.has(k)))
  const env = current.environment as Record<string, unknown> | null
  return {
    template: req.template ?? current.source,
    environment: req.environment ?? (cleared.size && env?.parameters ? { ...env, parameters: keep(env.parameters as Record<string, unknown>) } : current.environment),
    parameters: { ...keep(current.parameters as Record<string, unknown> | undefined), ...(req.parameters ?? {}) },
  }
}

export function createStackService(deps: ServiceDeps) {
  const { pool } = deps.db

  /** A stack of the actor's project by id or name. Other projects' stacks are "not found" (never revealed). */
  async function find(actor: Actor, ref: string, opts: { includeDeleted?: boolean } = {}): Promise<StackRecord> {
    const stack = await findStack(pool, actor.projectId, ref, { byId: UUID.test(ref), includeDeleted: opts.includeDeleted })
    if (!stack) throw new NotFoundError(`stack ${ref} not found`)
    return stack
  }

  async function run(input: StartTraversalInput, stack: { id: string; name: string }, action: StackAction): Promise<OperationResult> {
    const res = await startTraversal(pool, input)
    if (!res.started) {
      if (res.reason === 'not_found') throw new NotFoundError(`stack ${stack.name} not found`)
      throw new ConflictError(res.detail ?? `the ${action} could not start`)
    }
    return { stack, traversalId: res.traversalId, action, superseded: res.superseded }
  }

  /** The plan of a stored template (rollback target, check): evaluated within the inline allowance, or on a thread. */
  async function storedPlan(stack: StackRecord, templateId: string, opts: { fingerprints?: boolean } = {}): Promise<TraversalPlan> {
    return planFor((await storedDefinition(stack, templateId)).definition, opts)
  }

  /** A stored template's definition (and its parsed JSON). */
  async function storedDefinition(stack: StackRecord, templateId: string) {
    const t = await templateById(pool, templateId)
    if (!t) throw new ConflictError('the stored template is missing')
    const parsed = t.template && Object.keys(t.template).length ? (t.template as Record<string, unknown>) : null
    try {
      const definition = await definitionOf({ source: parsed ? null : t.source, parsed, environment: t.environment, parameters: t.parameters, stackName: stack.name, stackId: stack.id, projectId: stack.projectId })
      return { definition, parsed }
    } catch (err) {
      if (err instanceof BudgetExceeded) throw budgetError(err)
      throw err
    }
  }

  /**
   * Heat's `immutable` parameters: an update that gives one of the current
   * template's immutable parameters another value is refused (Heat's
   * ImmutableParameterModified), a 400 naming each (never its value).
   */
  async function refuseImmutableChanges(stack: StackRecord, values: Record<string, unknown>, names: string[]): Promise<void> {
    if (!stack.rawTemplateId) return
    const immutable = (await immutableParameters(pool, stack.rawTemplateId)).filter((n) => names.includes(n))
    if (!immutable.length) return
    const before = (await storedDefinition(stack, stack.rawTemplateId)).definition.parameters
    const changed = immutable.filter((n) => !isDeepStrictEqual(before[n] ?? null, values[n] ?? null)).sort()
    if (!changed.length) return
    const issues = changed.map((n) => ({ code: 'parameter' as const, path: `parameters.${n}`, line: null, column: null, message: `parameter ${n} is immutable and may not be updated` }))
    throw new ValidationError(`The following parameters are immutable and may not be updated: ${changed.join(', ')}`, issues)
  }

  /** The submission an update or preview means: PATCH semantics reuse the current template and parameters. */

  async function submissionFor(stack: StackRecord, req: UpdateRequest): Promise<Submission> {
    if (req.template && !req.existing) return submissionFrom(null, req)
    if (!stack.rawTemplateId) throw new ConflictError('the stack has no template to reuse')
    return submissionFrom(await templateInputs(pool, stack.rawTemplateId), req)
  }

  const checkContext = (actor: Actor, stack: StackRecord): CheckContext => ({ catalog: deps.catalog, limits: deps.limits, stackName: stack.name, stackId: stack.id, projectId: actor.projectId })

  /**
   * Heat's rules for external_id, checked before an update starts (the engine
   * keeps them too): it cannot be added to a resource Kiln manages nor
   * changed, and an adopted resource cannot be updated while it is set. Each
   * refusal is a 400 naming the resource's external_id.
   */
  async function refuseExternalChanges(stack: StackRecord, plan: TraversalPlan): Promise<void> {
    const external = plan.external ?? {}
    const names = Object.keys(external)
    if (!names.length) return
    const rows = await heldRowData(pool, stack.id, names)
    const issues = rows.flatMap((r) => {
      const e = external[String(r.name)]!
      const why = externalIdRefusal(String(r.name), adoptionOf(r.data), e.externalId, e.fingerprint)
      return why ? [{ code: 'structure' as const, path: `resources.${String(r.name)}.external_id`, line: null, column: null, message: why }] : []
    })
    if (issues.length) throw new ValidationError(issues.map((i) => `${i.path}: ${i.message}`).join('; '), issues)
  }

  /** The resources whose targets an update changes from those of the running traversal (lib/engine/preempt.ts). */
  async function preemptTargets(stack: StackRecord, plan: TraversalPlan): Promise<string[]> {
    const running = await storedPlan(stack, stack.rawTemplateId!, { fingerprints: true })
    return changedTargets({ dependsOn: running.dependsOn, fingerprints: running.fingerprints ?? {} }, { dependsOn: plan.dependsOn, fingerprints: plan.fingerprints ?? {} })
  }

  async function startRollback(stack: StackRecord, actor: string, expect: string | null): Promise<OperationResult> {
    let templateId = stack.lastGoodTemplateId
    let plan: TraversalPlan = { names: [], types: {}, dependsOn: {} }
    let before: StartTraversalInput['before']
    if (templateId) plan = await storedPlan(stack, templateId)
    else {
      // Rolling back a create: converge to nothing.
      templateId = crypto.randomUUID()
      const id = templateId
      before = (c) => insertTemplate(c, stack.id, { id, source: EMPTY_TEMPLATE_SOURCE, templateText: '{}', environment: {}, parameters: {} })
    }
    return run({ stackId: stack.id, action: 'ROLLBACK', rawTemplateId: templateId, plan, startedBy: actor, expectTraversalId: expect, before }, stack, 'ROLLBACK')
  }

  /** A check or a drift check: a traversal over the rows of the stack's template that changes none of them. */
  async function look(actor: Actor, ref: string, action: 'CHECK' | 'DRIFT'): Promise<OperationResult> {
    const stack = await find(actor, ref)
    const what = action === 'CHECK' ? 'check it' : 'check its drift'
    if (stack.status === 'IN_PROGRESS') throw new ConflictError(`stack ${stack.name} is ${stack.action}_IN_PROGRESS; ${what} when it is done`)
    if (!stack.rawTemplateId) throw new ConflictError('the stack has no template')
    const plan = await storedPlan(stack, stack.rawTemplateId)
    return run({ stackId: stack.id, action, rawTemplateId: stack.rawTemplateId, plan, startedBy: actor.name, expectTraversalId: stack.currentTraversalId }, stack, action)
  }

  return {
    find,

    async create(actor: Actor, req: CreateRequest): Promise<OperationResult> {
      if (!STACK_NAME.test(req.name)) {
        throw new ValidationError(`invalid stack name "${req.name}": it must start with a letter and contain only letters, digits, _ . - (at most 255)`)
      }
      const stackId = crypto.randomUUID()
      const checked = await checkSubmission(req, { catalog: deps.catalog, limits: deps.limits, stackName: req.name, stackId, projectId: actor.projectId })
      const templateId = crypto.randomUUID()
      const timeoutMins = req.timeoutMins ?? deps.defaultTimeoutMins
      try {
        return await run(
          {
            stackId,
            action: 'CREATE',
            rawTemplateId: templateId,
            plan: checked.plan,
            startedBy: actor.name,
            timeoutMins,
            expectTraversalId: null,
            // The stack and its template in one statement (one round trip fewer on the way to the first node).
            before: (c) =>
              insertStackWithTemplate(
                c,
                { id: stackId, projectId: actor.projectId, name: req.name, timeoutMins, disableRollback: req.disableRollback ?? true, createdBy: actor.name, tags: req.tags ?? [] },
                { id: templateId, source: checked.source, templateText: checked.templateText, environment: checked.environmentJson, parameters: checked.parameters },
              ),
          },
          { id: stackId, name: req.name },
          'CREATE',
        )
      } catch (err) {
        if ((err as { code?: string }).code === '23505') throw new ConflictError(`a stack named ${req.name} already exists`)
        throw err
      }
    },

    /**
     * Update a stack (also while an operation runs: the new traversal supersedes it). With
     * `guard.expect`, only if the stack is still at the template version the edit was written
     * against (409 with what changed, otherwise); with `guard.skipUnchanged`, an unchanged
     * submission starts nothing and answers `noChanges`.
     */
    async update(actor: Actor, ref: string, req: UpdateRequest, guard: UpdateGuard = {}): Promise<OperationResult> {
      const stack = await find(actor, ref)
      if (stack.action === 'DELETE') throw new ConflictError(`stack ${stack.name} is being deleted; it cannot be updated`)
      const expected = guard.expect !== undefined ? await expectedVersion(deps.db, stack, guard.expect, guard.expectFrom) : null
      if (expected && expected.templateId !== stack.rawTemplateId) throw await staleConflict(deps.db, stack, expected)
      // Preempting a running operation compares its template with this one, resource by resource.
      const preempting = req.preempt === true && stack.status === 'IN_PROGRESS' && stack.rawTemplateId !== null
      const checked = await checkSubmission(await submissionFor(stack, req), { ...checkContext(actor, stack), fingerprints: preempting })
      await refuseExternalChanges(stack, checked.plan)
      const parameterNames = checked.summary.parameters.map((p) => p.name)
      const unknown = (req.clearParameters ?? []).filter((n) => !parameterNames.includes(n))
      if (unknown.length) {
        throw new ValidationError(`clear_parameters: ${unknown.join(', ')} ${unknown.length === 1 ? 'is not a parameter' : 'are not parameters'} of the template`, unknown.map((n) => ({ code: 'parameter' as const, path: `clear_parameters.${n}`, line: null, column: null, message: `${n} is not a parameter of the template` })))
      }
      await refuseImmutableChanges(stack, checked.parameterValues, parameterNames)
      // Converge looks at the objects and new tags change the stack: neither is "no changes".
      const skippable = guard.skipUnchanged && req.converge !== true && req.tags === undefined
      if (skippable && (await isUnchanged(deps.db, stack, checked, req))) {
        return { stack: { id: stack.id, name: stack.name }, traversalId: null, action: 'UPDATE', superseded: null, noChanges: true }
      }
      const preempt = preempting ? await preemptTargets(stack, checked.plan) : undefined
      const templateId = crypto.randomUUID()
      try {
        const started = await run(
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
        if (!(expected && err instanceof ConflictError)) throw err
        const now = await find(actor, stack.id)
        if (now.rawTemplateId === expected.templateId) throw err
        throw await staleConflict(deps.db, now, expected)
      }
    },

    /** What an update would do, against the in-flight target (nothing is written). */
    async preview(actor: Actor, ref: string, req: UpdateRequest): Promise<PreviewResult> {
      const stack = await find(actor, ref)
      const computed = await computeUpdatePreview(deps.db, stack.id, (state) => submissionFrom(state.target, req), checkContext(actor, stack), deps.types)
      return computed.preview
    },

    async cancel(actor: Actor, ref: string, opts: { rollback: boolean }): Promise<OperationResult> {
      const stack = await find(actor, ref)
      if (stack.status !== 'IN_PROGRESS') throw new ConflictError(`stack ${stack.name} is ${stack.action}_${stack.status}: there is nothing to cancel`)
      if (stack.action === 'DELETE') throw new ConflictError('a delete cannot be cancelled')
      if (opts.rollback) {
        if (stack.action === 'ROLLBACK') throw new ConflictError('the stack is already rolling back')
        if (stack.action === 'CHECK' || stack.action === 'DRIFT') throw new ConflictError(`a ${stack.action === 'CHECK' ? 'check' : 'drift check'} has nothing to roll back; cancel it without rollback`)
        return startRollback(stack, actor.name, stack.currentTraversalId)
      }
      const res = await stopTraversal(pool, stack.id, `Stack ${stack.action} cancelled`)
      if (!res.stopped) throw new ConflictError('the operation finished before it could be cancelled')
      return { stack, traversalId: null, action: 'CANCEL', superseded: res.traversalId }
    },

    async delete(actor: Actor, ref: string): Promise<OperationResult> {
      const stack = await find(actor, ref)
      if (stack.action === 'DELETE' && stack.status === 'IN_PROGRESS') {
        return { stack, traversalId: stack.currentTraversalId, action: 'DELETE', superseded: null }
      }
      const templateId = crypto.randomUUID()
      return run(
        {
          stackId: stack.id,
          action: 'DELETE',
          rawTemplateId: templateId,
          plan: { names: [], types: {}, dependsOn: {} },
          startedBy: actor.name,
          abortInFlight: true,
          before: (c) => insertTemplate(c, stack.id, { id: templateId, source: EMPTY_TEMPLATE_SOURCE, templateText: '{}', environment: {}, parameters: {} }),
        },
        stack,
        'DELETE',
      )
    },

    /** Roll back to the last template that completed (or delete everything after a failed create). */
    async rollback(actor: Actor, ref: string): Promise<OperationResult> {
      const stack = await find(actor, ref)
      if (stack.action === 'DELETE') throw new ConflictError('a deleted stack cannot be rolled back')
      if (stack.status === 'COMPLETE' && stack.action !== 'ROLLBACK') {
        if (!stack.lastGoodTemplateId || stack.lastGoodTemplateId === stack.rawTemplateId) throw new ConflictError('the stack is already at its last good template')
      }
      return startRollback(stack, actor.name, stack.currentTraversalId)
    },

    async check(actor: Actor, ref: string): Promise<OperationResult> {
      return look(actor, ref, 'CHECK')
    },

    /** A drift check: every resource's type observes its object; what each found is stored (reads.drift). */
    async drift(actor: Actor, ref: string): Promise<OperationResult> {
      return look(actor, ref, 'DRIFT')
    },

    /** Worker job: the traversal failed and the stack rolls back on failure. No-op if the stack moved on. */
    async rollbackAfterFailure(stackId: string, failedTraversalId: string): Promise<OperationResult | null> {
      const stack = await liveStackById(pool, stackId)
      if (!stack) return null
      if (stack.currentTraversalId !== failedTraversalId || stack.status !== 'FAILED') return null
      try {
        return await startRollback(stack, 'automatic rollback', failedTraversalId)
      } catch (err) {
        if (err instanceof ConflictError) return null
        throw err
      }
    },
  }
}

export type StackService = ReturnType<typeof createStackService>
