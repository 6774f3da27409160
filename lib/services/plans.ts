/**
 * Saved plans (CloudFormation's change sets, Terraform's saved plans). A
 * plan is a preview stored immutable with the submission it was computed
 * from (template, environment, parameters, as checked) and what it was
 * computed against: the stack's current traversal and the version
 * (atomic_key) of each of its rows. Applying it starts exactly that
 * submission, in one transaction that first checks the stack's current
 * traversal is still that one and no row changed; otherwise nothing is
 * written and the answer is 409 naming what changed (another update, a
 * rollback, a row). A plan applies once and expires (KILN_PLAN_TTL_MS).
 */
import crypto from 'node:crypto'
import type { Db } from '../db/client'
import { deletePlan, findPlan, insertPlan, listPlans, markPlanApplied, rowDrift, setPlanTraversal, type PlanRecord, type RowDrift } from '../db/queries/plans'
import { insertTemplate } from '../db/queries/templates'
import { startTraversal } from '../db/queries/traversal'
import { traversalsSince } from '../db/queries/versions'
import { describeTraversals, staleConflict } from './edit-guard'
import { ConflictError, GoneError, NotFoundError } from '../plan/errors'
import { computeUpdatePreview, type AttributeSecrecy } from './preview'
import type { PreviewResult } from '../plan/preview-types'
import { submissionFrom, type Actor, type OperationResult, type StackService, type UpdateRequest } from './stacks'
import type { CheckContext, Limits } from '../plan/template-check'
import type { TypeCatalog } from '../template/types'
import { UUID } from '../ids'

export interface PlanDeps {
  db: Db
  catalog: TypeCatalog
  limits: Limits
  /** Which attributes are secret (their values are masked in the preview). */
  types: AttributeSecrecy
  /** How long a plan can be applied after it was computed. */
  ttlMs: number
}

/** A plan as the API shows it (the submission's template text is there; hidden parameter values are not). */
export interface PlanView {
  id: string
  stack: { id: string; name: string }
  createdBy: string
  createdAt: string
  expiresAt: string
  expired: boolean
  appliedAt: string | null
  appliedTraversalId: string | null
  /** What it was computed against. */
  against: { traversalId: string | null; templateId: string | null }
  preview: PreviewResult
}


function view(p: PlanRecord & { expired: boolean }, stack: { id: string; name: string }): PlanView {
  return {
    id: p.id,
    stack,
    createdBy: p.createdBy,
    createdAt: p.createdAt.toISOString(),
    expiresAt: p.expiresAt.toISOString(),
    expired: p.expired,
    appliedAt: p.appliedAt?.toISOString() ?? null,
    appliedTraversalId: p.appliedTraversalId,
    against: { traversalId: p.againstTraversalId, templateId: p.againstTemplateId },
    preview: p.preview as PreviewResult,
  }
}

/** Thrown inside the start's transaction when rows moved since the plan; rolls it back. */
class RowsChanged extends Error {
  constructor(readonly drift: RowDrift[]) {
    super('rows changed')
  }
}

export function createPlanService(deps: PlanDeps, stacks: StackService) {
  const { pool } = deps.db

  async function planOf(actor: Actor, ref: string, planId: string) {
    const stack = await stacks.find(actor, ref)
    const p = UUID.test(planId) ? await findPlan(pool, actor.projectId, planId) : null
    if (!p || p.stackId !== stack.id) throw new NotFoundError(`plan ${planId} not found`)
    return { stack, plan: p }
  }

  return {
    /** Compute a preview and store it as a plan (nothing else is written). */
    async create(actor: Actor, ref: string, req: UpdateRequest): Promise<PlanView> {
      const stack = await stacks.find(actor, ref)
      if (stack.action === 'DELETE') throw new ConflictError(`stack ${stack.name} is being deleted; it cannot be updated`)
      const check: CheckContext = { catalog: deps.catalog, limits: deps.limits, stackName: stack.name, stackId: stack.id, projectId: actor.projectId }
      const { preview, checked, state } = await computeUpdatePreview(deps.db, stack.id, (s) => submissionFrom(s.target, req), check, deps.types)
      const p = await insertPlan(pool, {
        stackId: stack.id,
        createdBy: actor.name,
        source: checked.source,
        template: JSON.parse(checked.templateText) as Record<string, unknown>,
        environment: checked.environmentJson,
        parameters: checked.parameters,
        resources: checked.plan,
        timeoutMins: req.timeoutMins ?? null,
        disableRollback: req.disableRollback ?? null,
        preview,
        againstTraversalId: state.stack.currentTraversalId,
        againstTemplateId: state.stack.rawTemplateId,
        rowVersions: Object.fromEntries(state.rows.map((r) => [String(r.id), r.atomicKey])),
        ttlMs: deps.ttlMs,
      })
      return view({ ...p, expired: false }, { id: stack.id, name: stack.name })
    },

    async list(actor: Actor, ref: string): Promise<PlanView[]> {
      const stack = await stacks.find(actor, ref)
      return (await listPlans(pool, stack.id)).map((p) => view(p, { id: stack.id, name: stack.name }))
    },

    async show(actor: Actor, ref: string, planId: string): Promise<PlanView> {
      const { stack, plan } = await planOf(actor, ref, planId)
      return view(plan, { id: stack.id, name: stack.name })
    },

    /** A plan by its id alone (the CLI's `kiln stack apply <plan>`), within the actor's project. */
    async byId(actor: Actor, planId: string): Promise<PlanView> {
      const p = UUID.test(planId) ? await findPlan(pool, actor.projectId, planId) : null
      if (!p) throw new NotFoundError(`plan ${planId} not found`)
      const stack = await stacks.find(actor, p.stackId)
      return view(p, { id: stack.id, name: stack.name })
    },

    async discard(actor: Actor, ref: string, planId: string): Promise<void> {
      const { stack } = await planOf(actor, ref, planId)
      if (!(await deletePlan(pool, stack.id, planId))) throw new NotFoundError(`plan ${planId} not found`)
    },

    /** Start exactly the plan's update, or refuse: 410 when expired, 409 naming what changed since it was computed. */
    async apply(actor: Actor, ref: string, planId: string): Promise<OperationResult> {
      const { stack, plan } = await planOf(actor, ref, planId)
      if (plan.appliedAt) throw new ConflictError(`plan ${planId} was already applied (traversal ${plan.appliedTraversalId ?? 'starting'}); compute a new one`)
      if (plan.expired) throw new GoneError(`plan ${planId} expired at ${plan.expiresAt.toISOString()}; compute a new one`, 'plan_expired')
      if (stack.action === 'DELETE') throw new ConflictError(`stack ${stack.name} is being deleted; it cannot be updated`)
      const templateId = crypto.randomUUID()
      let res
      try {
        res = await startTraversal(pool, {
          stackId: stack.id,
          action: 'UPDATE',
          rawTemplateId: templateId,
          plan: plan.resources,
          startedBy: actor.name,
          ...(plan.timeoutMins !== null ? { timeoutMins: plan.timeoutMins } : {}),
          ...(plan.disableRollback !== null ? { disableRollback: plan.disableRollback } : {}),
          expectTraversalId: plan.againstTraversalId,
          before: (c) => insertTemplate(c, stack.id, { id: templateId, source: plan.source, templateText: JSON.stringify(plan.template), environment: plan.environment, parameters: plan.parameters }),
          guard: async (c) => {
            const drift = await rowDrift(c, stack.id, plan.rowVersions)
            if (drift.length) throw new RowsChanged(drift)
            if (!(await markPlanApplied(c, plan.id))) throw new ConflictError(`plan ${planId} was already applied; compute a new one`)
          },
        })
      } catch (err) {
        if (!(err instanceof RowsChanged)) throw err
        const list = err.drift.map((d) => `${d.name} #${d.id} ${d.change}${d.now ? ` (now ${d.now})` : ''}`).join(', ')
        throw new ConflictError(`plan ${planId} is stale: resources changed since it was computed: ${list}; compute a new plan`, { rows: err.drift })
      }
      if (!res.started) {
        if (res.reason === 'not_found') throw new NotFoundError(`stack ${stack.name} not found`)
        if (res.reason !== 'conflict') throw new ConflictError(res.detail ?? 'the update could not start')
        // Another operation started since the plan was computed: say which, and what it changed.
        const now = await stacks.find(actor, stack.id)
        const since = (await traversalsSince(pool, stack.id, plan.againstTraversalId)).filter((t) => t.id !== plan.againstTraversalId)
        if (plan.againstTemplateId && now.rawTemplateId !== plan.againstTemplateId) {
          const stale = await staleConflict(deps.db, now, { templateId: plan.againstTemplateId, traversalId: plan.againstTraversalId }, `plan ${planId.slice(0, 8)}`)
          throw new ConflictError(`plan ${planId} is stale: ${stale.message}`, stale.details)
        }
        throw new ConflictError(`plan ${planId} is stale: the stack moved on since it was computed: ${describeTraversals(since)}; compute a new plan`, { since })
      }
      await setPlanTraversal(pool, plan.id, res.traversalId)
      return { stack: { id: stack.id, name: stack.name }, traversalId: res.traversalId, action: 'UPDATE', superseded: res.superseded, templateId }
    },
  }
}

export type PlanService = ReturnType<typeof createPlanService>
