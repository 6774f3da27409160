/**
 * check_resource: what a worker does with one node of a traversal (Heat's
 * WorkerService.check_resource in heat/engine/worker.py and CheckResource in
 * heat/engine/check_resource.py).
 *
 *   1. begin: the store checks the traversal is current, the node READY and
 *      the row unlocked, and locks it (or parks the node as the row's waiter);
 *   2. decide (pure, lib/engine/decide.ts) and act through the resource type,
 *      with no transaction open;
 *   3. finish: release the row with its new state, report to successors; or
 *      replace: hand the node to a new row that impersonates it.
 *
 * Returns the jobs to run next when the finish claimed successors (inline
 * continuation: a chain or a fan-out runs without queue hops).
 */
import crypto from 'node:crypto'
import type { Logger } from '../logger'
import type { OutsideObjects, OutsideOwner, ResourceContext, ResourceState, ResourceType, ResourceTypeConfig } from '../resources/types'
import { ParkAction, ReplaceRequired, ResourceActionError, type ParkWait } from '../resources/types'
import { changedProperties, needsReplacement, validateProperties } from '../resources/schema'
import { addSecretValues, secretsOfType, withAttributeForms } from '../resources/secrets'
import { storedForms } from '../template'
import { hookHandle, hooksOf, type HookType } from '../template/hooks'
import { createsAgain, decideCleanup, decideNode, type SeenObject } from './decide'
import { NodeSecrets } from './node-secrets'
import { adoptionOf, definitionFingerprint, externalIdRefusal, withoutAdoption } from './adoption'
import { boundedChanges, compareObserved, describeDrift, type DriftFinding } from './drift'
import { park, signalWaiter } from './park'
import type { ActionOutcome, BeginResult, ClaimedJob, ConvergenceStore, FinishRequest, HeadStart, NodeScope, OutsideObjectStore, ResourceRow, TemplateEvaluator } from './ports'
import type { TraversalCache, TraversalContext } from './traversal-context'
import type { NodePayload, ResourceAction } from './types'
import { nodeId, parseNodeId } from './types'

export interface ActionSignals {
  /** An AbortSignal for one action: fires on the traversal deadline, a stack abort (delete), or shutdown. */
  open(job: ClaimedJob, deadline: Date): { signal: AbortSignal; close(): void }
}

export interface NodeRunnerDeps {
  store: ConvergenceStore
  traversals: TraversalCache
  /** Resolves a node's properties, bounded (lib/evaluation/bounded.ts in a worker). */
  evaluator: Pick<TemplateEvaluator, 'propertiesOf'>
  types: { get(name: string): ResourceType | undefined }
  typeConfig: ResourceTypeConfig
  signals: ActionSignals
  log: Logger
  /** Claim successors this node makes ready and return them (no queue hop). */
  inline: boolean
  /**
   * How many successors of `job` the worker can take on now (its free job slots, within the
   * share of its slots the job's project may hold; the finishing job's own slot counts); default 1.
   */
  claimMax?: (job: ClaimedJob) => number
  /** Minimum interval between progress events of one node. */
  progressIntervalMs?: number
}

export type NodeOutcome =
  | 'created' | 'updated' | 'unchanged' | 'replaced' | 'deleted' | 'retained' | 'checked' | 'failed'
  | 'stale' | 'duplicate' | 'blocked' | 'skipped' | 'gone' | 'lock_lost'
  /** The action waits without a worker (ResourceContext.park): the slot is free. */
  | 'parked'

export interface NodeResult {
  outcome: NodeOutcome
  /** Claimed (and usually begun) successors, to run at once. */
  next: ClaimedJob[]
}

type Locked = Extract<BeginResult, { outcome: 'locked' }>

type Created = Awaited<ReturnType<ResourceType['create']>>

/** Whose action an action is: the row's uuid, the row it replaces, and the job its progress reports go to. */
interface Identity {
  uuid: string
  replacesUuid: string | null
  job: () => ClaimedJob
}

/** The store's records of outside objects, as the row `owner` sees them (ResourceContext.objects). */
export function bindOutsideObjects(store: OutsideObjectStore, owner: OutsideOwner): OutsideObjects {
  return {
    claim: (refs, opts) => store.claim(owner, refs, opts),
    find: (refs) => store.find(refs),
    inScope: (kind, scope) => store.inScope(kind, scope),
    settle: (refs, size) => store.settle(owner, refs, size),
    startDelete: (refs) => store.startDelete(owner, refs),
    forget: (refs) => store.forget(owner, refs),
    adopt: (refs, opts) => store.adopt(owner, refs, opts),
  }
}

export function physicalName(stackName: string, row: Pick<ResourceRow, 'name' | 'uuid'>): string {
  return `${stackName}-${row.name}-${row.uuid.replace(/-/g, '').slice(0, 12)}`
}

function payloadOf(row: ResourceRow, over: Partial<NodePayload> = {}): NodePayload {
  return {
    id: row.id,
    uuid: row.uuid,
    name: row.name,
    physicalId: row.physicalId,
    attributes: row.attributes ?? {},
    action: row.action,
    status: row.status,
    ...(row.secretForms.length ? { secretForms: row.secretForms } : {}),
    ...over,
  }
}

function message(err: unknown): string {
  if (err instanceof Error) return err.message || err.name
  return String(err)
}

export async function runNode(deps: NodeRunnerDeps, job: ClaimedJob): Promise<NodeResult> {
  try {
    // A successor claimed by the previous node's finish may already be begun (same transaction).
    const begun = job.begun ?? (await deps.store.beginNode(job))
    if (begun.outcome !== 'locked') return { outcome: begun.outcome, next: [] }
    const ctx = await deps.traversals.get(job.traversalId!)
    const node = new NodeRun(deps, job, begun, ctx)
    return await node.run()
  } finally {
    // A head start the run did not adopt (it failed before acting, say) must not run on unseen.
    job.headStart?.abort('the replacement did not use it')
  }
}

/**
 * An in-place update marks its row UPDATE_IN_PROGRESS only if it is still
 * running after this long; a quicker one's finish records both states in its
 * own transaction, which saves a round trip per node.
 */
export const MARK_AFTER_MS = 50

class NodeRun {
  /** The action whose IN_PROGRESS state the finish must still record. */
  private unmarked: ResourceAction | null = null
  /** The hook this node stopped at is cleared (atHook): a resumed park was the hook's, not the action's. */
  private pastHook = false
  private readonly row: ResourceRow
  private readonly scope: NodeScope
  private readonly key: { rid: number; update: boolean }
  private readonly log: Logger
  /** What no reason, event or log line of this node may show. */
  private readonly secrets: NodeSecrets
  /** The secret forms the resolved properties carry: stored on the row with them. */
  private secretForms: string[] = []

  constructor(
    private readonly deps: NodeRunnerDeps,
    private readonly job: ClaimedJob,
    private readonly begun: Locked,
    private readonly ctx: TraversalContext | null,
  ) {
    this.row = begun.resource
    this.scope = { stack: begun.stack, traversal: begun.traversal }
    this.key = { rid: job.graphKeyId ?? job.resourceId!, update: job.isUpdate! }
    this.secrets = new NodeSecrets({
      types: deps.types,
      known: () => {
        const def = this.ctx?.definition
        return def ? [...def.secretForms, ...(def.resources[this.row.name]?.secretForms ?? [])] : []
      },
      row: this.row,
      inputs: begun.inputs,
      typeOfInput: (name) => this.ctx?.definition?.resources[name]?.type,
    })
    this.log = this.secrets.logger(deps.log.scope({ stack: begun.stack.name, trav: begun.traversal.id.slice(0, 8), res: `${this.row.name}#${this.row.id}`, node: this.key.update ? 'update' : 'cleanup' }))
  }

  private links() {
    const id = nodeId(this.key)
    const index = this.ctx?.index
    return {
      successors: (index?.requiredBy.get(id) ?? []).map(parseNodeId),
      isRoot: index?.roots.has(id) ?? false,
    }
  }

  async run(): Promise<NodeResult> {
    try {
      if (!this.ctx) return this.fail('CREATE', 'the traversal record is missing')
      if (this.scope.traversal.action === 'CHECK') return await this.check()
      if (this.scope.traversal.action === 'DRIFT') return await this.drift()
      return this.key.update ? await this.update() : await this.cleanup()
    } catch (err) {
      // Anything unexpected still releases the row and fails the node (Heat bug 1703043: never hang).
      this.log.error(`unexpected error: ${message(err)}`)
      return this.fail(this.key.update ? 'UPDATE' : 'DELETE', `unexpected error: ${message(err)}`)
    }
  }

  private async finish(req: Omit<FinishRequest, 'successors' | 'isRoot' | 'claim'>, outcome: NodeOutcome): Promise<NodeResult> {
    const { successors, isRoot } = this.links()
    const unmarked = this.unmarked ? { inProgressEvent: this.unmarked } : {}
    const claimMax = this.deps.claimMax?.(this.job) ?? 1
    const res = await this.deps.store.finishNode(this.job, { ...req, ...unmarked, successors, isRoot, claim: this.deps.inline && claimMax > 0, claimMax })
    if (res.outcome !== 'ok') {
      this.log.warn(`finish: ${res.outcome}`)
      return { outcome: res.outcome, next: [] }
    }
    return { outcome, next: res.claimed }
  }

  /** No secret (node-secrets.ts) reaches a status reason, an event or a log line. */
  private redact(text: string): string {
    return this.secrets.mask(text)
  }

  private fail(action: ResourceAction, reason: string, aborted = false): Promise<NodeResult> {
    const text = this.redact(aborted ? reason : `Resource ${action} failed: ${reason}`)
    this.log.warn(text)
    // A failed create or update may have made or changed something that uses what this node's inputs
    // are: its row is cleaned up before them (Heat keeps the union of the old and the new requires).
    const requires = action === 'CREATE' || action === 'UPDATE' ? [...new Set([...this.row.requires, ...this.requires()])].sort((a, b) => b - a) : undefined
    return this.finish({ ok: false, reason: text, set: { action, status: 'FAILED', statusReason: text, ...(requires ? { requires } : {}) }, resourceEvent: true }, 'failed')
  }

  private requires(): number[] {
    return [...new Set(this.begun.inputs.map((p) => p.id))].sort((a, b) => b - a)
  }

  /** The context an action runs in, as the row `as` (this row, or a replacement a head start runs for). */
  private resourceContext(signal: AbortSignal, as: Identity): ResourceContext {
    let last = 0
    const every = this.deps.progressIntervalMs ?? 1000
    const owner = { projectId: this.ctx!.stored.projectId, stackId: this.scope.stack.id, resourceName: this.row.name, resourceUuid: as.uuid }
    // The park this run resumes from was the hook's, not the action's: the action starts afresh (its own wait, its own time).
    const resumed = this.pastHook ? null : (this.begun.resumed ?? null)
    return {
      projectId: owner.projectId,
      stackId: this.scope.stack.id,
      stackName: this.scope.stack.name,
      resourceName: this.row.name,
      resourceUuid: as.uuid,
      traversalId: this.scope.traversal.id,
      deadline: this.scope.traversal.deadline,
      replacesUuid: as.replacesUuid,
      physicalName: physicalName(this.scope.stack.name, { name: this.row.name, uuid: as.uuid }),
      signal,
      progress: (msg, fraction) => {
        const now = Date.now()
        if (now - last < every) return
        last = now
        void this.deps.store.reportProgress(as.job(), this.redact(msg), fraction ?? null)
      },
      log: this.log,
      config: this.deps.typeConfig,
      objects: bindOutsideObjects(this.deps.store.objects, owner),
      signals: {
        waitFor: signalWaiter(this.deps.store.signals, owner.stackId, signal, resumed),
        list: (handle) => this.deps.store.signals.list(owner.stackId, handle),
        watch: async (handle) => {
          const { wakeKey, seen } = await this.deps.store.signals.read(owner.stackId, handle)
          return { wakeKey, seen }
        },
        clear: (handle) => this.deps.store.signals.clear(owner.stackId, handle),
      },
      park,
      resumed,
    }
  }

  /** Run a resource action with an AbortSignal; returns the error instead of throwing. */
  private act<T>(fn: (rc: ResourceContext) => Promise<T>): Promise<ActionOutcome<T>> {
    return this.launch(fn, { uuid: this.row.uuid, replacesUuid: this.begun.replacesUuid, job: () => this.job })
  }

  /**
   * Run an action as `as`. `own` is a head start's controller, which can also
   * stop it; an action under the lock stops only through the worker's signal
   * (a cancel, a delete, the deadline), so it needs no combined signal.
   */
  private async launch<T>(fn: (rc: ResourceContext) => Promise<T>, as: Identity, own?: AbortController): Promise<ActionOutcome<T>> {
    const handle = this.deps.signals.open(this.job, this.scope.traversal.deadline)
    // A parked node woken to stop (a delete, a preempting update, a time-out) runs its action aborted.
    const stop = this.begun.resumed?.abort
    const extra = [...(own ? [own.signal] : []), ...(stop ? [AbortSignal.abort(new Error(stop))] : [])]
    const signal = extra.length ? AbortSignal.any([handle.signal, ...extra]) : handle.signal
    try {
      return { ok: true, value: await fn(this.resourceContext(signal, as)) }
    } catch (error) {
      const aborted = signal.aborted ? String(signal.reason instanceof Error ? signal.reason.message : signal.reason ?? 'aborted') : null
      return { ok: false, error, aborted }
    } finally {
      handle.close()
    }
  }

  /**
   * Head start (a replacement of a state-only type): the create starts now,
   * as the new row (whose uuid the worker picks and the replace call uses),
   * while the call that inserts and locks that row is in flight, instead of
   * after it. The new row's node run adopts it (createAction). A state-only
   * type's actions change nothing outside Kiln, so a create whose row this
   * worker then does not get (the traversal moved on, the lock was lost) is
   * aborted and dropped without a trace; a type with outside effects acts
   * only under the lock, as before. The replace call was one round trip on
   * the critical path per replaced node: 4.7–6.9 ms (median) in a layered-100
   * replace-all at D = 0.2 s.
   */
  private headStart(typeName: string, props: Record<string, unknown>): HeadStart | null {
    const type = this.deps.types.get(typeName)
    if (!this.deps.inline || !type?.stateOnly) return null
    const uuid = crypto.randomUUID()
    const own = new AbortController()
    const head: Omit<HeadStart, 'result'> = { uuid, propsJson: JSON.stringify(props), job: this.job, abort: (reason) => own.abort(new Error(reason)) }
    const result = this.launch((rc) => type.create(rc, props), { uuid, replacesUuid: this.row.uuid, job: () => head.job }, own)
    return Object.assign(head, { result })
  }

  /** A create: the head start this row's replace call left running if it is this very create, else a new action. */
  private createAction(type: ResourceType, props: Record<string, unknown>): Promise<ActionOutcome<Created>> {
    const head = this.job.headStart
    if (head) {
      this.job.headStart = undefined
      // Started by headStart() with type.create: the same type, since the row's type is the one it was started for.
      if (head.uuid === this.row.uuid && head.propsJson === JSON.stringify(props)) return head.result as Promise<ActionOutcome<Created>>
      head.abort('the replacement resolved other properties')
    }
    return this.act((rc) => type.create(rc, props))
  }

  private async update(): Promise<NodeResult> {
    const def = this.ctx!.definition?.resources[this.row.name]
    if (!def) return this.fail('UPDATE', this.ctx!.definitionError ?? `no definition for ${this.row.name} in the traversal's template`)
    const type = this.deps.types.get(def.type)
    if (!type) return this.fail(this.row.action === 'INIT' ? 'CREATE' : 'UPDATE', `unknown resource type ${def.type}`)
    const creating = createsAgain(this.row)
    let props: Record<string, unknown>
    try {
      // Within a small allowance on this thread, else on an evaluation thread under the full budget;
      // a spent budget fails this node with the budget's name (BudgetExceeded's message).
      const inputs = this.begun.inputs.map((p) => ({ ...p, secretAttributes: secretsOfType(this.deps.types.get(this.ctx!.definition!.resources[p.name]?.type ?? '')).attributes }))
      const { properties: resolved, secretForms } = await this.deps.evaluator.propertiesOf(this.ctx!.definition!, this.row.name, inputs)
      this.secrets.learn(secretForms)
      const checked = validateProperties(type.properties, resolved, { acceptUnknown: type.acceptsAnyProperties === true })
      if (checked.issues.length) {
        const text = checked.issues.map((i) => `resources.${this.row.name}.properties.${i.path}: ${i.message}`).join('; ')
        return this.fail(creating ? 'CREATE' : 'UPDATE', `Property error: ${text}`)
      }
      props = checked.value
      // Stored with the properties: values its type declares secret are secret wherever else they show.
      const forms = new Set(secretForms)
      addSecretValues(type, { properties: props }, forms)
      // With them, the forms of the row's attributes made from them (kept by an unchanged row).
      this.secretForms = withAttributeForms(type, { properties: props, attributes: this.row.attributes }, storedForms(forms))
      this.secrets.learn(forms)
    } catch (err) {
      return this.fail(creating ? 'CREATE' : 'UPDATE', message(err))
    }
    const common = { currentTemplateId: this.scope.traversal.rawTemplateId, requires: this.requires(), deletionPolicy: def.deletionPolicy, clearReplacedBy: true, secretForms: this.secretForms }
    if (def.externalId !== undefined) return this.external(type, def, def.externalId, creating, common)
    // external_id removed from an adopted resource: Kiln manages its object from now on, and deletes it with the stack.
    if (adoptionOf(this.row.data).externalId !== undefined) Object.assign(common, { data: withoutAdoption(this.row.data) })

    // A look at the object first, when the type can say what a failed row needs, or the update converges.
    const converge = this.ctx!.stored.converge === true
    const look = creating ? null : await this.look(type, props, converge)
    if (look && 'outcome' in look) return look
    // After a look, the type's `prev` is the object as seen (its properties over the stored ones).
    const prev = look?.prev ?? this.stored()
    const atTemplate = this.row.currentTemplateId === this.scope.traversal.rawTemplateId
    const decision = decideNode(this.row, def.type, type, props, prev, undefined, look ? { seen: look.seen, converge } : undefined, atTemplate)

    switch (decision.kind) {
      case 'noop':
        return this.finish({ ok: true, reason: 'unchanged', set: common, payload: payloadOf({ ...this.row, secretForms: this.secretForms }) }, 'unchanged')
      case 'replace':
        return this.replace(def.type, decision.reason, props)
      case 'create': {
        const held = await this.atHook('pre-create', 'CREATE')
        if (held) return held
        // Write-ahead for effects outside Kiln: if this worker dies after the create made
        // something and before its result is stored, the row's cleanup still finds it.
        if (!type.stateOnly && !(await this.deps.store.recordIntent(this.job, props, this.requires()))) {
          this.log.warn('lock lost before the create ran')
          return { outcome: 'lock_lost', next: [] }
        }
        const res = await this.createAction(type, props)
        if (!res.ok) return this.actionFailed('CREATE', res)
        return this.completed('CREATE', def.type, props, res.value, common, 'created')
      }
      case 'update': {
        const held = await this.atHook('pre-update', 'UPDATE')
        if (held) return held
        const marked = this.markWhenSlow('UPDATE')
        const res = await this.act((rc) => type.update(rc, props, prev, decision.changed))
        await marked()
        if (!res.ok) {
          if (res.error instanceof ReplaceRequired && !res.aborted) return this.replace(def.type, res.error.message, props)
          return this.actionFailed('UPDATE', res)
        }
        const observed = look ? { eventData: { observed: look.finding.state, ...(decision.repair ? { repaired: describeDrift(look.finding) } : {}) } } : {}
        return this.completed('UPDATE', def.type, props, res.value, common, 'updated', observed)
      }
    }
  }

  /**
   * Observe the row's object before deciding, when that can change the
   * decision: a FAILED row of a type that says what its failed rows need
   * (needsReplaceFailed), or any row when the update converges. Null when
   * there is nothing to look at; a NodeResult when the look itself failed
   * (the node fails with its reason).
   */
  private async look(type: ResourceType, props: Record<string, unknown>, converge: boolean): Promise<{ seen: SeenObject; prev: ResourceState; finding: DriftFinding } | NodeResult | null> {
    if (!type.observe || this.row.action === 'INIT' || this.row.action === 'DELETE' || this.row.type !== type.name) return null
    const failed = this.row.status === 'FAILED'
    if (!(converge || (failed && type.needsReplaceFailed))) return null
    const stored = this.stored()
    const res = await this.act((rc) => type.observe!(rc, stored))
    if (!res.ok) {
      const action = failed || converge ? 'UPDATE' : this.row.action
      return res.aborted ? this.fail(action, `observe aborted (${res.aborted})`, true) : this.fail(action, `observe failed: ${message(res.error)}`)
    }
    const obs = res.value
    const finding = compareObserved(stored.properties, obs)
    if (obs.state === 'gone') return { seen: { state: 'gone' }, prev: stored, finding }
    const base = { ...stored.properties, ...obs.properties }
    const changed = changedProperties(base, props)
    return {
      seen: {
        state: 'exists',
        changed,
        notUpdatable: needsReplacement(type.properties, changed),
        problems: obs.problems ?? [],
        replaceFailed: !failed ? null : type.needsReplaceFailed ? type.needsReplaceFailed(obs, stored) : 'the type cannot repair a failed resource',
      },
      prev: { ...stored, properties: base, attributes: { ...stored.attributes, ...(obs.attributes ?? {}) } },
      finding,
    }
  }

  private completed(
    action: 'CREATE' | 'UPDATE',
    type: string,
    props: Record<string, unknown>,
    out: { physicalId?: string | null; attributes?: Record<string, unknown>; data?: Record<string, unknown> },
    common: Record<string, unknown>,
    outcome: NodeOutcome,
    extra: { eventData?: Record<string, unknown>; reason?: string } = {},
  ): Promise<NodeResult> {
    const physicalId = out.physicalId !== undefined ? out.physicalId : (this.row.physicalId ?? physicalName(this.scope.stack.name, this.row))
    const attributes = out.attributes ?? this.row.attributes ?? {}
    const data = out.data ?? (common.data as Record<string, unknown> | undefined) ?? this.row.data ?? {}
    const reason = extra.reason ?? 'state changed'
    const secretForms = withAttributeForms(this.deps.types.get(type), { properties: props, attributes }, this.secretForms)
    const set = { ...common, secretForms, action, status: 'COMPLETE' as const, statusReason: reason, type, physicalId, properties: props, attributes, data }
    const payload = payloadOf({ ...this.row, secretForms }, { physicalId, attributes, action, status: 'COMPLETE' })
    return this.finish({ ok: true, reason, set, resourceEvent: true, payload, ...(extra.eventData ? { eventData: extra.eventData } : {}) }, outcome)
  }

  /**
   * A resource with external_id (Heat's key): its object is adopted, never
   * created, and never updated while external_id is set (Heat's rule; the
   * service refuses such an update with a 400 before it starts, and this is
   * the same rule for one that got past it). Deleting it, or the stack,
   * leaves the object in place (deletion_policy Retain), as Heat does.
   */
  private async external(type: ResourceType, def: { name: string; type: string; properties: Record<string, unknown> }, externalId: string, creating: boolean, common: Record<string, unknown>): Promise<NodeResult> {
    const fingerprint = definitionFingerprint(def)
    const keep = { ...common, deletionPolicy: 'Retain' }
    const failedRow = this.row.status === 'FAILED'
    if (!creating) {
      const refusal = externalIdRefusal(this.row.name, adoptionOf(this.row.data), externalId, fingerprint)
      // Refused without touching the row: it is as it was, only this update fails.
      if (refusal) return this.finish({ ok: false, reason: this.redact(refusal) }, 'failed')
      if (!failedRow) return this.finish({ ok: true, reason: 'unchanged (adopted with external_id)', set: keep, payload: payloadOf({ ...this.row, secretForms: this.secretForms }) }, 'unchanged')
      // A FAILED adopted row (a check found it drifted, a worker died): adopted again, as it is now.
    }
    const action = creating ? 'CREATE' : 'UPDATE'
    if (!type.adopt) return this.fail(action, `${type.name} cannot adopt an existing object (external_id)`)
    if (!(await this.deps.store.markAdopting(this.job, externalId))) {
      this.log.warn('lock lost before the adoption ran')
      return { outcome: 'lock_lost', next: [] }
    }
    const res = await this.act((rc) => type.adopt!(rc, externalId, { dryRun: false }))
    if (!res.ok) return this.actionFailed(action, res)
    const a = res.value
    return this.completed(action, def.type, a.properties, { physicalId: a.physicalId, attributes: a.attributes, data: { ...(a.data ?? {}), externalId, adoptedFrom: fingerprint } }, keep, creating ? 'created' : 'updated', {
      reason: `adopted ${externalId} (external_id)`,
      eventData: { adopted: externalId },
    })
  }

  /**
   * Heat's hooks: when the environment sets `hook` on this resource, the node
   * stops before its action until the hook is cleared (a signal with
   * `unset_hook`, kiln_clear_hook), parked, holding no worker slot. Null once
   * it may go on; else how the node run ends for now (parked, or failed: the
   * traversal's time ran out first, or it was told to stop).
   */
  private async atHook(hook: HookType, action: ResourceAction): Promise<NodeResult | null> {
    if (!hooksOf(this.ctx!.definition?.hooks, this.row.name).includes(hook)) return null
    const handle = hookHandle(hook, this.scope.traversal.id, this.row.name)
    const reason = `${action} paused until Hook ${hook} is cleared`
    const res = await this.act(async (rc) => {
      // The pause is recorded after the look: a clear that comes after the record wakes the park
      // (or makes it answer 'again'); one before it finds no pause (a 400). Once per wait: a
      // resumed run has said so already.
      const beforePark = rc.resumed ? undefined : () => this.deps.store.recordHook(this.job, hook, reason)
      const out = await rc.signals.waitFor(handle, 1, this.scope.traversal.deadline.getTime() - Date.now(), { reason, beforePark })
      if (out.kind !== 'done') throw new ResourceActionError(`Hook ${hook} was not cleared before the stack's timeout`)
      this.pastHook = true
    })
    return res.ok ? null : this.actionFailed(action, res)
  }

  private actionFailed(action: ResourceAction, res: { error: unknown; aborted: string | null }): Promise<NodeResult> {
    if (res.aborted) return this.fail(action, `${action} aborted (${res.aborted})`, true)
    if (res.error instanceof ParkAction) return this.park(action, res.error.wait)
    return this.fail(action, message(res.error))
  }

  /**
   * The action waits (ResourceContext.park): park the node, and give the slot
   * back. A wake that came after the action looked makes the park answer
   * 'again': the node runs again at once instead of sleeping through it.
   */
  private async park(action: ResourceAction, wait: ParkWait): Promise<NodeResult> {
    const res = await this.deps.store.parkNode(this.job, {
      action,
      reason: this.redact(wait.reason),
      until: wait.until,
      wakeKey: wait.wakeKey ?? null,
      seen: wait.seen ?? 0,
      before: { action: this.row.action, status: this.row.status, statusReason: this.row.statusReason },
      inputs: this.begun.inputs,
      ...(this.unmarked ? { inProgressEvent: this.unmarked } : {}),
    })
    if (res.outcome === 'again') return this.run()
    // Told to stop while the action ran (its notice may have come before the action listened).
    if (res.outcome === 'aborted') return this.fail(action, `${action} aborted (${res.reason})`, true)
    if (res.outcome === 'parked') this.log.info(`parked until ${wait.until.toISOString()}: ${this.redact(wait.reason)}`)
    else this.log.warn(`park: ${res.outcome}`)
    return { outcome: res.outcome, next: [] }
  }

  /** Mark the row `<action>_IN_PROGRESS` once the action has run MARK_AFTER_MS; the returned function waits for that write, or cancels it. */
  private markWhenSlow(action: ResourceAction): () => Promise<void> {
    // A resumed node's park marked its row when it parked.
    if (this.begun.resumed) return async () => {}
    this.unmarked = action
    let writing: Promise<boolean> | null = null
    // Timer reason: see MARK_AFTER_MS.
    const timer = setTimeout(() => {
      writing = this.deps.store.markInProgress(this.job, action)
      // Handled when awaited below; until then a failure must not count as unhandled (that would end the process).
      writing.catch(() => {})
    }, MARK_AFTER_MS)
    return async () => {
      clearTimeout(timer)
      if (writing && (await writing)) this.unmarked = null
    }
  }

  /** What the engine stored after the row's last successful action, as the resource type sees it. */
  private stored(): ResourceState {
    return { physicalId: this.row.physicalId, properties: this.row.properties ?? {}, attributes: this.row.attributes ?? {}, data: this.row.data ?? {} }
  }

  private async replace(type: string, reason: string, props: Record<string, unknown>): Promise<NodeResult> {
    this.unmarked = null
    const head = this.headStart(type, props)
    reason = this.redact(reason)
    const req = { type, requires: this.requires(), reason, claim: this.deps.inline, ...(head ? { uuid: head.uuid } : {}) }
    const res = await this.deps.store.replaceNode(this.job, req).catch((err: unknown) => {
      head?.abort('the replace call failed')
      throw err
    })
    if (res.outcome !== 'ok') {
      head?.abort(`the replace call answered ${res.outcome}`)
      return { outcome: res.outcome, next: [] }
    }
    this.log.info(`replaced by #${res.replacement.id}: ${reason}`)
    const next = res.claimed
    if (head) {
      // Adopted only by a run that holds the new row's lock; any other answer (not begun here, a busy row) drops it.
      const begun = next?.begun
      if (next && begun?.outcome === 'locked' && begun.resource.uuid === head.uuid) {
        head.job = next
        next.headStart = head
      } else head.abort('the replacement was not begun by this worker')
    }
    return { outcome: 'replaced', next: next ? [next] : [] }
  }

  private async cleanup(): Promise<NodeResult> {
    const decision = decideCleanup(this.row, this.scope.traversal.rawTemplateId)
    const deleted = { action: 'DELETE' as const, status: 'COMPLETE' as const }
    switch (decision.kind) {
      case 'noop':
        return this.finish({ ok: true, reason: decision.reason }, 'unchanged')
      case 'forget':
        return this.finish({ ok: true, reason: 'never created', set: { ...deleted, statusReason: 'never created' }, resourceEvent: true, deleted: true }, 'deleted')
      case 'retain':
        return this.finish({ ok: true, reason: 'retained', set: { ...deleted, statusReason: 'deletion_policy Retain: physical resource kept' }, resourceEvent: true, deleted: true }, 'retained')
      case 'delete': {
        const type = this.deps.types.get(this.row.type)
        if (!type) return this.fail('DELETE', `unknown resource type ${this.row.type}`)
        const held = await this.atHook('pre-delete', 'DELETE')
        if (held) return held
        // A create that never stored its result deletes by the properties it was started with.
        const state = { ...this.stored(), properties: this.row.properties ?? this.row.pendingProperties ?? {} }
        // deletion_policy Snapshot: a copy first (a type that cannot take one was refused when the template
        // was checked; a row stored before that rule is deleted as it always was, and the reason says so).
        let kept = ''
        if (this.row.deletionPolicy === 'Snapshot') {
          if (type.snapshot) {
            const snap = await this.act((rc) => type.snapshot!(rc, state))
            if (!snap.ok) return snap.aborted ? this.fail('DELETE', `DELETE aborted (${snap.aborted})`, true) : this.fail('DELETE', `the snapshot failed, so nothing was deleted: ${message(snap.error)}`)
            kept = snap.value ? `; snapshot ${snap.value.name} kept` : '; nothing left to snapshot'
          } else kept = `; ${type.name} cannot take a snapshot: deleted without one`
        }
        const res = await this.act((rc) => type.delete(rc, state))
        if (!res.ok) return this.actionFailed('DELETE', res)
        const reason = `state changed${kept}`
        return this.finish({ ok: true, reason, set: { ...deleted, statusReason: reason }, resourceEvent: true, deleted: true }, 'deleted')
      }
    }
  }

  /**
   * A drift check: the type observes the object, the finding is stored
   * against the row, and the row itself is left as it was (its action and
   * status are the last action's). A look that fails is stored as
   * NOT_CHECKED with its reason, and the check goes on with the other rows:
   * one unreachable object must not hide the drift of the rest.
   */
  private async drift(): Promise<NodeResult> {
    const type = this.deps.types.get(this.row.type)
    const state = this.stored()
    let finding: DriftFinding
    if (!type?.observe) finding = { state: 'NOT_CHECKED', changes: [], problems: [type ? `${this.row.type} cannot observe its object` : `unknown resource type ${this.row.type}`] }
    else if (this.row.properties === null) finding = { state: 'NOT_CHECKED', changes: [], problems: [`the resource was never created (${this.row.action}_${this.row.status})`] }
    else {
      const res = await this.act((rc) => type.observe!(rc, state))
      finding = res.ok ? compareObserved(state.properties, res.value) : { state: 'NOT_CHECKED', changes: [], problems: [this.redact(`observe failed: ${res.aborted ?? message(res.error)}`)] }
    }
    await this.deps.store.recordDrift(this.job, {
      stackId: this.scope.stack.id,
      resourceId: this.row.id,
      resourceName: this.row.name,
      state: finding.state,
      changes: boundedChanges(finding.changes),
      problems: finding.problems,
    })
    const reason = this.redact(describeDrift(finding))
    const eventData = { drift: finding.state, changed: finding.changes.map((c) => c.property), problems: finding.problems.map((p) => this.redact(p)) }
    return this.finish({ ok: true, reason, payload: payloadOf(this.row), eventData }, 'checked')
  }

  /**
   * Heat's stack check, by looking: the type observes the object (gone or
   * drifted fails the check, naming what changed), then runs its own check.
   */
  private async check(): Promise<NodeResult> {
    const type = this.deps.types.get(this.row.type)
    if (!type) return this.fail('CHECK', `unknown resource type ${this.row.type}`)
    const state = this.stored()
    const res = await this.act(async (rc) => {
      if (type.observe) {
        const finding = compareObserved(state.properties, await type.observe(rc, state))
        if (finding.state === 'DELETED' || finding.state === 'MODIFIED') throw new ResourceActionError(`${this.row.physicalId ?? this.row.name}: ${describeDrift(finding)}`)
      }
      await type.check?.(rc, state)
    })
    if (!res.ok) return this.actionFailed('CHECK', res)
    return this.finish(
      { ok: true, reason: 'state changed', set: { action: 'CHECK', status: 'COMPLETE', statusReason: 'state changed' }, resourceEvent: true, payload: payloadOf(this.row, { action: 'CHECK', status: 'COMPLETE' }) },
      'checked',
    )
  }
}
