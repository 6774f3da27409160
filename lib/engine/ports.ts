/**
 * The store interface the convergence logic runs against. The real one is
 * lib/db/store.ts (PostgreSQL); every method is one short transaction, and
 * none is held open across a resource action.
 */
import type { AdoptOutcome, ClaimOutcome, OutsideKind, OutsideOwner, OutsideRecord, OutsideRef, ResourceSignal, ResumedPark } from '../resources/types'
import type { DriftState, PropertyChange } from './drift'
import type { SecretAwareProperties } from '../template/resolve'
import type { PortableDefinition, ResourceValues, StoredTemplate } from '../template/types'
import type { NodeKey, NodePayload, ResourceAction, ResourceStatus, StackAction, TraversalGraph } from './types'

export type JobKind = 'check_resource' | 'rollback'

export interface ClaimedJob {
  id: number
  kind: JobKind
  stackId: string
  /** The stack's project: a worker caps each project's share of its slots (KILN_PROJECT_SLOT_SHARE). */
  projectId: string
  traversalId: string | null
  resourceId: number | null
  isUpdate: boolean | null
  /** Graph node a replacement reports as (Heat's impersonation). */
  graphKeyId: number | null
  attempts: number
  /** Set when the finish that claimed this job also began it (same transaction): no begin round trip. */
  begun?: BeginResult
  /** In memory only: a create already running for this replacement row (check-resource.ts, head starts). */
  headStart?: HeadStart
}

/** How a resource action ended: its value, or the error (and the abort reason if its signal fired). */
export type ActionOutcome<T = unknown> = { ok: true; value: T } | { ok: false; error: unknown; aborted: string | null }

/**
 * A state-only type's create that the worker started under a replacement row's
 * identity while the replace call locking that row was in flight. The node run
 * of the new row adopts it if it resolves the same properties; otherwise, or
 * if the row never reaches that run, it is aborted and its result dropped.
 */
export interface HeadStart {
  /** The uuid the replacement row was inserted with (chosen by the worker). */
  uuid: string
  /** The validated properties the create runs with, as JSON. */
  propsJson: string
  /** The job progress reports go to: the old row's until the new row's job is known. */
  job: ClaimedJob
  result: Promise<ActionOutcome>
  abort(reason: string): void
}

export interface ResourceRow {
  id: number
  uuid: string
  stackId: string
  name: string
  type: string
  action: ResourceAction
  status: ResourceStatus
  statusReason: string
  physicalId: string | null
  currentTemplateId: string | null
  requires: number[]
  replaces: number | null
  replacedBy: number | null
  properties: Record<string, unknown> | null
  /** Properties of a create that started and has stored no result (kiln_record_intent). */
  pendingProperties: Record<string, unknown> | null
  attributes: Record<string, unknown> | null
  data: Record<string, unknown> | null
  /** Forms of the secret values its properties were made from (see lib/template/secrecy.ts). */
  secretForms: string[]
  deletionPolicy: string
  engineId: string | null
  lockTraversalId: string | null
  leaseExpiresAt: Date | null
}

export interface NodeScope {
  stack: { id: string; name: string; action: StackAction }
  traversal: { id: string; action: StackAction; rawTemplateId: string; deadline: Date }
}

export type BeginResult =
  | { outcome: 'gone' | 'stale' | 'duplicate' | 'skipped' | 'blocked' }
  | ({ outcome: 'locked'; resource: ResourceRow; inputs: NodePayload[]; replacesUuid: string | null; resumed?: ResumedNode } & NodeScope)

/** A parked node taken up again (lib/db/functions/26_resume_node.sql): its action runs again from its start. */
export interface ResumedNode extends ResumedPark {
  /** Woken to stop (a delete, a preempting update, its traversal timed out or failing): the action starts aborted with this reason. */
  abort: string | null
}

/** A node parks: its row stays locked, its job waits unclaimed (kiln_park_node). */
export interface ParkRequest {
  action: ResourceAction
  reason: string
  until: Date
  wakeKey: string | null
  /** How many times wakeKey had fired when the action looked: a later wake makes the park answer 'again'. */
  seen: number
  /** The row's action, status and reason before the node began: what it decides from when it resumes. */
  before: { action: ResourceAction; status: ResourceStatus; statusReason: string }
  /** The node's inputs, kept for its resumption (a superseded traversal's are dropped). */
  inputs: NodePayload[]
  /** The action's `<action>_IN_PROGRESS` was not recorded yet: record it now. */
  inProgressEvent?: ResourceAction
}

export type ParkResult = { outcome: 'parked' | 'again' | 'gone' | 'lock_lost' } | { outcome: 'aborted'; reason: string }

/** Column changes written when a node releases its row (absent = unchanged). */
export interface RowUpdate {
  action?: ResourceAction
  status?: ResourceStatus
  statusReason?: string
  type?: string
  physicalId?: string | null
  properties?: Record<string, unknown>
  attributes?: Record<string, unknown>
  data?: Record<string, unknown>
  secretForms?: string[]
  requires?: number[]
  currentTemplateId?: string
  deletionPolicy?: string
  clearReplacedBy?: boolean
}

export interface FinishRequest {
  ok: boolean
  /** Status reason on failure; a short note otherwise. */
  reason?: string
  set?: RowUpdate
  /** The row's action/status changed: record a resource event (else a node event). */
  resourceEvent?: boolean
  /** What successors receive (update nodes only). */
  payload?: NodePayload | null
  successors: NodeKey[]
  isRoot: boolean
  /** Claim successors this makes ready, to run them without a queue hop. */
  claim: boolean
  /** At most this many (the worker's free job slots; default 1). */
  claimMax?: number
  /** A cleanup node removed the row. */
  deleted?: boolean
  /** The action ended before its row was marked `<action>_IN_PROGRESS`: record that event first, in this transaction. */
  inProgressEvent?: ResourceAction
  eventData?: Record<string, unknown>
}

export type FinishResult = { outcome: 'gone' | 'lock_lost' } | { outcome: 'ok'; claimed: ClaimedJob[] }

export interface ReplaceRequest {
  type: string
  requires: number[]
  reason: string
  claim: boolean
  /** The new row's uuid, when the worker chose it (a head start runs under it). */
  uuid?: string
}

export type ReplaceResult =
  | { outcome: 'gone' | 'lock_lost' | 'stale' }
  | { outcome: 'ok'; replacement: ResourceRow; claimed: ClaimedJob | null }

/** Everything a worker needs to run the nodes of one traversal (loaded once, cached). */
export interface StoredTraversal {
  id: string
  stackId: string
  stackName: string
  projectId: string
  action: StackAction
  rawTemplateId: string
  deadline: Date
  /** An update with `converge`: each node observes its row's object before deciding. */
  converge?: boolean
  graph: TraversalGraph
  /**
   * `parsed`: the template as stored when it was submitted (plain JSON), so a worker need not re-read the text;
   * `source`, the text, only where nothing parsed was stored (`{}`: a delete, a rollback to nothing).
   */
  template: { source: string | null; parsed: Record<string, unknown> | null; environment: Record<string, unknown>; parameters: Record<string, unknown> }
}

/**
 * Kiln's records of objects outside Kiln (files, databases, roles) that
 * resources made or are making; a resource type sees them bound to its row
 * (ResourceContext.objects, lib/resources/types.ts, where the rules are).
 */
export interface OutsideObjectStore {
  claim(owner: OutsideOwner, refs: OutsideRef[], opts?: { sizeBytes?: number; quotaBytes?: number; snapshotOf?: string }): Promise<ClaimOutcome>
  find(refs: OutsideRef[]): Promise<(OutsideRecord | null)[]>
  inScope(kind: OutsideKind, scope: string): Promise<OutsideRecord[]>
  settle(owner: OutsideOwner, refs: OutsideRef[], sizeBytes?: number): Promise<void>
  startDelete(owner: OutsideOwner, refs: OutsideRef[]): Promise<OutsideRef[]>
  forget(owner: OutsideOwner, refs: OutsideRef[]): Promise<void>
  adopt(owner: OutsideOwner, refs: OutsideRef[], opts: { unrecorded: boolean; dryRun?: boolean; sizeBytes?: number }): Promise<AdoptOutcome>
}

/** Signals sent to resources (OS::Heat::WaitConditionHandle); ResourceContext.signals binds them to a stack and an action. */
export interface SignalStore {
  /**
   * The handle's signals, with the key a signal to it fires (ParkWait.wakeKey) and how many times it had
   * fired when they were read (one snapshot: a signal stored later changes the count).
   */
  read(stackId: string, handle: string): Promise<{ wakeKey: string; seen: number; signals: ResourceSignal[] }>
  list(stackId: string, handle: string): Promise<ResourceSignal[]>
  clear(stackId: string, handle: string): Promise<void>
}

/** What a drift node found of one row (lib/engine/drift.ts), as stored for `GET /api/stacks/{id}/drift`. */
export interface DriftRecord {
  stackId: string
  resourceId: number
  resourceName: string
  state: DriftState
  changes: PropertyChange[]
  problems: string[]
}

export interface ConvergenceStore {
  beginNode(job: ClaimedJob): Promise<BeginResult>
  finishNode(job: ClaimedJob, req: FinishRequest): Promise<FinishResult>
  replaceNode(job: ClaimedJob, req: ReplaceRequest): Promise<ReplaceResult>
  /** Park the node: give the worker slot back while the action waits (ParkRequest). */
  parkNode(job: ClaimedJob, req: ParkRequest): Promise<ParkResult>
  markInProgress(job: ClaimedJob, action: ResourceAction): Promise<boolean>
  /**
   * Store the properties a create with outside effects is about to use, and the rows it is made
   * from (`requires`, so a traversal planned meanwhile cleans it up first); false: the lock is lost, do not act.
   */
  recordIntent(job: ClaimedJob, properties: Record<string, unknown>, requires: number[]): Promise<boolean>
  reportProgress(job: ClaimedJob, message: string, fraction: number | null): Promise<void>
  /** The node reached a hook (`pre-create`, …) and parks at it next: its resource event, with Heat's reason. */
  recordHook(job: ClaimedJob, hook: string, reason: string): Promise<void>
  /**
   * Before an adoption (external_id) acts: the row is kept when deleted (deletion_policy Retain, as Heat
   * never deletes an external resource) and its data names the external id, so that the cleanup of an
   * adoption interrupted half-way never removes the object. False: the lock is lost, do not act.
   */
  markAdopting(job: ClaimedJob, externalId: string): Promise<boolean>
  /** Store what a drift traversal's node found (one short transaction; a re-run overwrites it). */
  recordDrift(job: ClaimedJob, record: DriftRecord): Promise<void>
  loadTraversal(traversalId: string): Promise<StoredTraversal | null>
  objects: OutsideObjectStore
  signals: SignalStore
}

/**
 * Evaluating a tenant's template, bounded in work and time. The real one is
 * lib/evaluation/bounded.ts: it runs a small evaluation on the calling thread
 * and a large one on an evaluation thread. A port, so that the engine needs no
 * thread pool and a test can evaluate in-process.
 */
export interface TemplateEvaluator {
  /** A stored template's definition (it was checked when submitted). */
  definitionOf(stored: StoredTemplate): Promise<PortableDefinition>
  /** A resource's properties with the values of the resources it reads, and the secret forms they carry. */
  propertiesOf(def: Pick<PortableDefinition, 'resources' | 'secretForms'>, name: string, inputs: ResourceValues[]): Promise<SecretAwareProperties>
}
