/**
 * The resource plugin interface. A resource type declares its properties and
 * attributes and implements create / update / delete (and optionally check)
 * against something real. The engine owns everything else: locking, state,
 * retries, replacement, ordering.
 *
 * Actions are async and take an AbortSignal (ctx.signal): it fires when the
 * stack is deleted or cancelled while the action runs, when the stack times
 * out, or when the worker shuts down. An action that sees it should stop
 * promptly and throw (any error); the engine records `<ACTION>_FAILED`.
 *
 * Idempotence matters: a worker can die after the action changed the outside
 * world but before the result was stored. The engine then marks the row FAILED
 * and replaces it, updates it in place (when `observe` finds the object and
 * `needsReplaceFailed` says it can be repaired), or retries a create in
 * place; a replaced FAILED row's cleanup
 * calls `delete` with whatever was stored; for a create that stored nothing,
 * with the properties it was started with (written before a create of a type
 * that is not `stateOnly` runs). So `delete` must tolerate "already gone", and
 * types that can should derive their physical names from `ctx.physicalName`
 * (stable per row) so that a half-done create can still be found and removed.
 *
 * Objects outside Kiln (files, databases, roles) are recorded in Kiln's own
 * database through `ctx.objects`, and the record is committed *before* the
 * action touches anything: `claim` before making or changing, `settle` after;
 * `startDelete` before removing, `forget` after. A record names its owner:
 * the project, the logical resource (stack + resource name) and the row. The
 * rules every such type keeps:
 *   - a create or update alters only an object a record says this logical
 *     resource made (claim answers `taken over`), or one that did not exist
 *     when it claimed a fresh record; it never touches an object it found
 *     there (a file, database or role Kiln did not make) or one another stack
 *     or resource owns (claim answers `refused`);
 *   - a delete removes only what its own row still owns (startDelete names
 *     it), so the cleanup of a replaced row never removes its successor's
 *     object, and a delete after a worker died mid-create finds the record of
 *     what that create may have made, whatever state it is in;
 *   - nothing is keyed or stored where a tenant could forge it (a file beside
 *     the workspace, a catalog comment the tenant's role can rewrite).
 * Tenants stay inside their project: a file type writes only under its
 * project's workspace (`config.workspaceDir/<project id>`), never through a
 * symbolic link, within the project's quota; a database login made for a
 * tenant reaches its own database only.
 *
 * Observing (`observe`) reads the real object and says whether it is gone or
 * exists, with its properties as seen. Drift detection, `converge`, stack
 * check and the recovery of a FAILED row all rest on it. Its rules:
 *   - read-only: it changes nothing, neither the object nor Kiln's records
 *     (`ctx.objects.find` only);
 *   - fast: a single look (one stat and read, one catalog query), no waiting
 *     for the object to settle; the engine runs it under the row's lock;
 *   - abortable: it stops when `ctx.signal` fires, as an action does;
 *   - faithful to the schema: a property is reported in the form the engine
 *     stores it, and a value that equals the stored one is reported exactly
 *     as stored (`0644` stays `0644`, never `420`), so that comparing the two
 *     finds only real changes. A property it cannot read is left out, and is
 *     then never compared.
 * A state-only type has nothing outside Kiln: what the engine stores is all
 * there is of it, and its observe answers `exists` with the stored properties
 * and attributes (`observeStored`), so it is never found drifted.
 */
import type { Logger } from '../logger'

export type PropertyType = 'string' | 'integer' | 'number' | 'boolean' | 'map' | 'list' | 'any'

export type PropertyConstraint =
  | { length: { min?: number; max?: number }; description?: string }
  | { range: { min?: number; max?: number }; description?: string }
  | { allowed_values: unknown[]; description?: string }
  | { allowed_pattern: string; description?: string }
  /** A string's size in bytes (UTF-8), e.g. a file's content. A Kiln addition to Heat's constraints. */
  | { bytes: { max: number }; description?: string }
  /** A command (a list): its first item, the program, is one of these. A Kiln addition (Kiln::Exec's allow-list). */
  | { program: readonly string[]; description?: string }

export interface PropertySchema {
  type: PropertyType
  description?: string
  required?: boolean
  default?: unknown
  /** Changing this property updates the resource in place; otherwise the resource is replaced. */
  updateAllowed?: boolean
  constraints?: PropertyConstraint[]
  /** For `map`: the schema of known keys (unknown keys are rejected when given). */
  schema?: Record<string, PropertySchema>
  /** For `list`: the schema of each item. */
  items?: PropertySchema
  /** Never shown in API responses or events (e.g. passwords). */
  secret?: boolean
  /**
   * A string longer than this many bytes is shown in API responses cut to
   * this size, with a note of its full size (a file's content): a resource
   * list must not carry megabytes per resource. Stored and compared in full.
   */
  shownUpToBytes?: number
}

export interface AttributeSchema {
  description: string
  type?: PropertyType
  /** Never shown in API responses or events. */
  secret?: boolean
  /**
   * Secret, but shown to the stack's project on a show of this one resource
   * (an explicit request, as an output show is): what a person needs in
   * order to use the resource, such as the command that signals a handle.
   * Masked in lists, events and logs all the same.
   */
  shownOnRequest?: boolean
  /**
   * The properties the value is made from (default: all of them). When one of them holds a
   * secret (a hidden parameter's value, or text made from one), the attribute is secret too,
   * whatever its value looks like: a digest or a length of a secret gives it away as surely.
   */
  derivedFrom?: readonly string[]
}

/** What a type needs from the installation (from the env parser, passed in by the worker). */
export interface ResourceTypeConfig {
  /** Directory under which `Kiln::File` gives each project a workspace of its own (`<dir>/<project id>/`). */
  workspaceDir: string
  /** Bytes of files one project's workspace may hold (KILN_WORKSPACE_QUOTA_BYTES; default DEFAULT_WORKSPACE_QUOTA_BYTES). */
  workspaceQuotaBytes?: number
  /** Server `Kiln::Postgres::Database` creates databases and roles on. */
  targetDatabaseUrl?: string
  /** Connections each tenant login role may hold at once (KILN_TENANT_CONNECTION_LIMIT; default DEFAULT_TENANT_CONNECTION_LIMIT). */
  tenantConnectionLimit?: number
  /** What one project may take of the target server (the KILN_PROJECT_* settings; default DEFAULT_PROJECT_QUOTAS). */
  projectQuotas?: ProjectQuotas
  /**
   * Connections Kiln itself may hold on the target server (its pools, listeners and the type's own
   * sessions, when the target is Kiln's own server; only the type's sessions on a server of its own):
   * left out of what tenants' roles may be given (lib/config.ts, kilnConnectionsOn).
   */
  kilnConnections?: number
  /** The URL clients reach Kiln at (KILN_PUBLIC_URL): where a wait condition handle is signalled. */
  publicUrl?: string
}

export const DEFAULT_WORKSPACE_QUOTA_BYTES = 64 * 1024 * 1024
export const DEFAULT_TENANT_CONNECTION_LIMIT = 20

/** Per project, on the target server of `Kiln::Postgres::Database`; each names the setting that changes it. */
export interface ProjectQuotas {
  /** KILN_PROJECT_CONNECTION_LIMIT: the sum of the connection limits of the project's tenant roles. */
  connections: number
  /** KILN_PROJECT_MAX_DATABASES */
  databases: number
  /** KILN_PROJECT_MAX_SNAPSHOTS */
  snapshots: number
  /** KILN_PROJECT_DATABASE_QUOTA_BYTES: its databases and snapshots together. */
  bytes: number
}

export const DEFAULT_PROJECT_QUOTAS: ProjectQuotas = { connections: 100, databases: 20, snapshots: 10, bytes: 1024 * 1024 * 1024 }

/** What an outside object is: a file (`scope`: project id), a database or a role (`scope`: the server). */
export type OutsideKind = 'file' | 'pg_database' | 'pg_role'

export interface OutsideRef {
  kind: OutsideKind
  /** Where `key` is unique: the project id for a file, `host:port` of the server for a database or role. */
  scope: string
  /** The file's path relative to the project's workspace (normalised); the database or role name. */
  key: string
}

export interface OutsideOwner {
  projectId: string
  stackId: string
  resourceName: string
  resourceUuid: string
}

export interface OutsideRecord extends OutsideRef, OutsideOwner {
  state: 'creating' | 'present' | 'deleting'
  sizeBytes: number
  /** A snapshot (deletion_policy: Snapshot): the key of the object it is a copy of. */
  snapshotOf: string | null
}

export type ClaimOutcome =
  /** Recorded for this row. `previous[i]`: null when refs[i] had no record (a fresh claim), else the record this logical resource had (taken over). */
  | { outcome: 'claimed'; previous: (OutsideRecord | null)[] }
  /** Another stack or resource owns `ref`; nothing was recorded. */
  | { outcome: 'refused'; ref: OutsideRef; owner: OutsideRecord }
  /**
   * Another row of this logical resource owns `ref` and is being acted on now
   * (an older traversal deleting it): taking the object over would let that
   * action remove it under this one. Nothing was recorded.
   */
  | { outcome: 'busy'; ref: OutsideRef; owner: OutsideRecord }
  /** The project's files would exceed its workspace quota; nothing was recorded. */
  | { outcome: 'over_quota'; usedBytes: number; limitBytes: number }

export type AdoptOutcome =
  /** Recorded for this row (not in a dry run): `previous[i]` as for a claim (null: there was no record). */
  | { outcome: 'adopted'; previous: (OutsideRecord | null)[] }
  /** A resource of this or another stack of the project still owns `ref`, or another project does. */
  | { outcome: 'refused'; ref: OutsideRef; owner: OutsideRecord }
  /** Another row of this logical resource owns `ref` and is being acted on now. */
  | { outcome: 'busy'; ref: OutsideRef; owner: OutsideRecord }
  /** `ref` has no record, and the type adopts only what Kiln made (unrecorded: false). */
  | { outcome: 'unrecorded'; ref: OutsideRef }

/**
 * Kiln's records of the outside objects this row makes, bound to the row
 * (see the contract at the top of this file). Every call is one committed
 * transaction; a claim of several refs records all of them or none.
 */
export interface OutsideObjects {
  /**
   * Record that this row is making (or changing) these objects, before it acts.
   * `sizeBytes`/`quotaBytes` (one file): the size the file will have, and the
   * project's quota, checked against the sum of its recorded files.
   * `snapshotOf`: these objects are a snapshot of that one (deletion_policy:
   * Snapshot); the records outlive the row, listed on its stack.
   */
  claim(refs: OutsideRef[], opts?: { sizeBytes?: number; quotaBytes?: number; snapshotOf?: string }): Promise<ClaimOutcome>
  /** The action finished: the objects exist (a file: `sizeBytes` is its size now). */
  settle(refs: OutsideRef[], sizeBytes?: number): Promise<void>
  /**
   * The records of these refs (null: none). Read before looking at the
   * outside world: an object that exists with no record is not Kiln's, and
   * is refused before any claim is written.
   */
  find(refs: OutsideRef[]): Promise<(OutsideRecord | null)[]>
  /** Before removing: marks this row's records `deleting` and returns the refs this row owns (the rest are gone, or a successor's). */
  startDelete(refs: OutsideRef[]): Promise<OutsideRef[]>
  /** The objects are gone: drops this row's records. */
  forget(refs: OutsideRef[]): Promise<void>
  /**
   * Every record of `kind` on `scope` (the server, or a project's workspace),
   * of every project: what a type's quotas and budgets add up. Read-only.
   */
  inScope(kind: OutsideKind, scope: string): Promise<OutsideRecord[]>
  /**
   * Adopt existing objects (a resource's `external_id`): record them as this
   * row's, all or none. An object with a record may be adopted only within
   * its project, and only when no live resource owns it (one kept by
   * `deletion_policy: Retain`, or left by a deleted stack or resource), or
   * when this logical resource owns it already; an object with no record only
   * when `unrecorded` (a file in the project's own workspace; never a
   * database on a shared server, which may be anyone's). `dryRun`: answer
   * the same and write nothing (an import preview).
   */
  adopt(refs: OutsideRef[], opts: { unrecorded: boolean; dryRun?: boolean; sizeBytes?: number }): Promise<AdoptOutcome>
}

export interface ResourceContext {
  /** The tenant: the project the stack belongs to. */
  projectId: string
  stackId: string
  stackName: string
  resourceName: string
  /** Stable id of this row (a replacement is a new row with a new uuid). */
  resourceUuid: string
  /**
   * The traversal this action is part of (absent outside one: an import preview): with the row and the
   * action, what makes an idempotency key that every attempt at this action shares (a retry, a resumed
   * park, a run after a worker died) and no later action repeats.
   */
  traversalId?: string
  /** When the traversal gives up (the stack's timeout); the action's signal fires then. Absent outside a traversal. */
  deadline?: Date
  /** Uuid of the row this one replaces, when it is a replacement. */
  replacesUuid: string | null
  /** A name unique to this row, usable for physical names: `<stack>-<resource>-<uuid prefix>`. */
  physicalName: string
  /** Fires when the action must stop (delete/cancel of the stack, timeout, shutdown). */
  signal: AbortSignal
  /** Report progress; shown live on the graph. `fraction` is 0..1 when known. */
  progress(message: string, fraction?: number): void
  log: Logger
  config: ResourceTypeConfig
  /** Kiln's records of the objects outside Kiln this row makes (Kiln's database). */
  objects: OutsideObjects
  /** Signals sent to this stack's resources (OS::Heat::WaitConditionHandle), by handle (its physical id). */
  signals: ResourceSignals
  /**
   * Wait without holding a worker: the node *parks* (its row stays locked, its
   * worker slot is given back) until `wait.wakeKey` fires, `wait.until` passes
   * or the node is told to stop, and then the action runs again from its
   * start, with `resumed` set. So an action that parks must get to its park
   * again without repeating what it did before (the wait condition reads its
   * signals, then parks). Never returns.
   */
  park(wait: ParkWait): never
  /** When this run resumes a parked action: when it first parked, until when, and whether that time is up. */
  resumed: ResumedPark | null
}

/** How an action waits without a worker (ResourceContext.park). */
export interface ParkWait {
  /** Shown on the node while it waits ("waiting for 2 signal(s) on handle"). */
  reason: string
  /** The wait ends then at the latest (the action then runs again with `resumed.due`). */
  until: Date
  /** What wakes it sooner: a key the engine fires when the awaited thing happens. */
  wakeKey?: string
  /** How many times `wakeKey` had fired when the action looked (the engine's count, read with what it looked at). */
  seen?: number
}

export interface ResumedPark {
  since: Date
  until: Date
  /** Woken because `until` passed. */
  due: boolean
}

/** Thrown by ResourceContext.park; the engine parks the node. */
export class ParkAction extends Error {
  override name = 'ParkAction'
  constructor(readonly wait: ParkWait) {
    super(`parked: ${wait.reason}`)
  }
}

/** What a sender gave with a signal (Heat's signal body). */
export interface SignalDetails {
  status?: 'SUCCESS' | 'FAILURE'
  reason?: string
  data?: unknown
  id?: string | number
}

/** One signal sent to a handle: `POST …/resources/<handle>/signal`. */
export interface ResourceSignal {
  id: string
  status: 'SUCCESS' | 'FAILURE'
  reason: string
  data: unknown
}

export type SignalWaitOutcome =
  /** `count` SUCCESS signals arrived */
  | { kind: 'done'; signals: ResourceSignal[] }
  /** a FAILURE signal arrived */
  | { kind: 'failed'; signals: ResourceSignal[] }
  /** the time ran out first */
  | { kind: 'timeout'; signals: ResourceSignal[] }

export interface SignalWaitOptions {
  /** What the node shows while it waits (default: "waiting for N signal(s) on <handle>"). */
  reason?: string
  /** Runs once the signals are looked at and do not decide yet, just before the node parks. */
  beforePark?: () => Promise<void>
}

export interface ResourceSignals {
  /**
   * Wait until `count` SUCCESS signals of the handle are stored, or one
   * FAILURE, or `timeoutMs` passes (counted from the first run of the action,
   * not from a resumed one). Answers at once when the signals are there;
   * otherwise the node parks (ResourceContext.park) and this action runs again
   * when a signal arrives or the time is up. Rejects when the action's signal
   * aborts.
   */
  waitFor(handle: string, count: number, timeoutMs: number, opts?: SignalWaitOptions): Promise<SignalWaitOutcome>
  list(handle: string): Promise<ResourceSignal[]>
  /**
   * The key a signal to `handle` fires, and how many times it has fired: read it *before* asking for
   * something whose news comes as a signal (a provider's callback), then park with both, so that news
   * arriving in between wakes the park at once instead of being slept through.
   */
  watch(handle: string): Promise<{ wakeKey: string; seen: number }>
  /** Forget the handle's signals (the handle is deleted). */
  clear(handle: string): Promise<void>
}

/** What the engine stored after the previous successful action. */
export interface ResourceState {
  physicalId: string | null
  properties: Record<string, unknown>
  attributes: Record<string, unknown>
  /** Plugin-private data returned by the previous action. */
  data: Record<string, unknown>
}

/** What `observe` saw of the real object. */
export type Observation =
  /** Nothing is there (the file, the database was removed). */
  | { state: 'gone' }
  | ObservedObject

export interface ObservedObject {
  state: 'exists'
  /**
   * The properties the type can read back, in the form the engine stores them
   * (see the rules at the top of this file). A property left out is not compared.
   */
  properties: Record<string, unknown>
  /** Attributes as an action would return them; omitted: the stored ones still hold. */
  attributes?: Record<string, unknown>
  /**
   * What is wrong with the object beyond its properties, each a sentence for
   * the user (a login role that is missing, a privilege someone granted): the
   * object has drifted, and an update in place repairs it.
   */
  problems?: string[]
}

/** What `adopt` took into the stack: the object as observed, and what the engine stores for the row. */
export interface Adopted {
  physicalId: string
  /** The properties as observed (the row's stored properties from now on). */
  properties: Record<string, unknown>
  attributes: Record<string, unknown>
  data?: Record<string, unknown>
}

export interface ActionResult {
  /** The physical id (what `get_resource` returns). Defaults to the previous one, then to `ctx.physicalName`. */
  physicalId?: string | null
  attributes?: Record<string, unknown>
  data?: Record<string, unknown>
}

export interface ResourceType {
  /** e.g. `OS::Heat::TestResource` */
  name: string
  /** A provider's type registered by a project: only that project's templates may use it (unset: every project's). */
  ownerProject?: string
  description: string
  properties: Record<string, PropertySchema>
  attributes: Record<string, AttributeSchema>
  /**
   * Replaced at every update of its stack, changed or not (Heat's UpdateWaitConditionHandle: a new handle,
   * with no signals, for every rollout), never left as it is by an update, a rollback or a converge.
   */
  replaceOnEveryUpdate?: boolean
  /** Accept properties the schema does not name (OS::Heat::None stubs out any type). */
  acceptsAnyProperties?: boolean
  /** Any attribute name resolves (to null when unknown), as OS::Heat::None does. */
  acceptsAnyAttribute?: boolean
  /**
   * The type's actions change nothing outside Kiln's database: all there is of
   * the resource is what the engine stores (OS::Heat::None, Value, RandomString,
   * TestResource). Steps touching only such rows commit without waiting for the
   * disk: after a database crash they may be lost and are re-run, and there is
   * nothing outside to leak or duplicate. Leave unset for anything else.
   */
  stateOnly?: boolean
  /** Create the resource. `props` are resolved, validated and defaulted. */
  create(ctx: ResourceContext, props: Record<string, unknown>): Promise<ActionResult>
  /**
   * Update in place. Called only when every changed property is `updateAllowed`.
   * Throw `ReplaceRequired` to ask for a replacement instead ("replace me").
   */
  update(ctx: ResourceContext, props: Record<string, unknown>, prev: ResourceState, changed: string[]): Promise<ActionResult>
  /**
   * Optional, pure: decide before anything changes that this update must replace
   * the resource (a reason) or not (null). Saves marking the row
   * UPDATE_IN_PROGRESS for an update that then asks to be replaced.
   */
  replaceOnUpdate?(props: Record<string, unknown>, prev: ResourceState, changed: string[]): string | null
  /** Delete the resource. Must succeed when it is already gone. */
  delete(ctx: ResourceContext, state: ResourceState): Promise<void>
  /**
   * Take a signal sent to the resource (`POST …/resources/<name>/signal`, Heat's resource signal), in the
   * web process, with the details the sender gave. Without it the type takes no signals (400). Throw
   * ResourceActionError to refuse the signal (the sender gets a 400 with its message).
   */
  signal?(ctx: ResourceContext, state: ResourceState, details: SignalDetails): Promise<void>
  /**
   * Verify the resource is healthy (stack check), beyond what `observe` shows:
   * a check first observes the object (gone or drifted fails it), then calls
   * this. Throw if not.
   */
  check?(ctx: ResourceContext, state: ResourceState): Promise<void>
  /**
   * Read the real object (read-only, fast, abortable: the rules at the top of
   * this file). `state` is what the engine stored; the object is found by its
   * physical id or stored properties. Without it, the type cannot be checked
   * for drift and is taken as it is stored.
   */
  observe?(ctx: ResourceContext, state: ResourceState): Promise<Observation>
  /**
   * Heat's `needs_replace_failed`: a FAILED row (an action failed, or its
   * worker died mid-action) whose object `observe` found to exist must be
   * replaced (answer the reason) or can be repaired by an update in place
   * (answer null; the update then runs even with no property changed). A
   * FAILED row whose object is gone is always replaced. Without it (or
   * without `observe`), a FAILED row is replaced, as Heat does by default.
   */
  needsReplaceFailed?(seen: ObservedObject, state: ResourceState): string | null
  /**
   * Adopt an object that exists (a resource's `external_id`, Heat's key):
   * find it by that id, observe it, and record it as this row's
   * (`ctx.objects.adopt`: never another project's object, nor one a live
   * resource owns). Never creates or changes the object. Throws
   * ResourceActionError, for the user to read, when there is nothing to adopt
   * or it may not be adopted. `dryRun`: the same answer, nothing recorded (an
   * import preview; read-only, as observe). Without it, `external_id` is
   * refused for the type when the template is checked.
   */
  adopt?(ctx: ResourceContext, externalId: string, opts: { dryRun: boolean }): Promise<Adopted>
  /**
   * What `adopt` answers for several objects at once (an import preview, one
   * context per resource), in order: the Adopted, or the error adopt would
   * throw. For a type whose lookups are costly one by one (a connection per
   * object): it looks at them all with a bounded number of lookups. Without
   * it, a preview calls `adopt` for each in turn.
   */
  adoptMany?(items: { ctx: ResourceContext; externalId: string }[], opts: { dryRun: boolean }): Promise<(Adopted | Error)[]>
  /**
   * Keep a copy of the object before it is deleted (deletion_policy:
   * Snapshot): the engine calls it, then `delete`. The copy is recorded
   * through `ctx.objects.claim(refs, { snapshotOf })` before it is made, and
   * outlives the row. Answers the snapshot's name, or null when there was
   * nothing left to copy. Idempotent, as every action: a retry finds the copy
   * it made. Without it, deletion_policy Snapshot is refused for the type.
   */
  snapshot?(ctx: ResourceContext, state: ResourceState): Promise<{ name: string } | null>
  /**
   * Remove a snapshot `snapshot` made (`DELETE /api/stacks/{stack}/snapshots/{name}`,
   * in the web process), and forget its records; `ctx` is bound to the row
   * that took it. Answers `busy` (with the reason) when it cannot go now: a
   * restore is copying it, or it is being taken.
   */
  deleteSnapshot?(ctx: ResourceContext, name: string): Promise<{ outcome: 'deleted' } | { outcome: 'busy'; reason: string }>
}

/** Thrown by `update` to ask the engine to replace the resource (Heat's UpdateReplace). */
export class ReplaceRequired extends Error {
  override name = 'ReplaceRequired'
  constructor(reason = 'the resource must be replaced') {
    super(reason)
  }
}

/** An action failed in a way the user should read (shown as the resource's status reason). */
export class ResourceActionError extends Error {
  override name = 'ResourceActionError'
}

/** One problem with a resource's properties; `path` is relative to `properties` (e.g. `action_wait_secs.create`). */
export interface PropertyIssue {
  path: string
  message: string
}
