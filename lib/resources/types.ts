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
 * and replaces it (or retries a create in place), and the FAILED row's cleanup
 * calls `delete` with whatever was stored; for a create that stored nothing,
 * with the properties it was started with (written before a create of a type
 * that is not `stateOnly` runs). So `delete` must tolerate "already gone", and
 * types that can should derive their physical names from `ctx.physicalName`
 * (stable per row) so that a half-done create can still be found and removed.
 */
import type { Logger } from '../logger'

export type PropertyType = 'string' | 'integer' | 'number' | 'boolean' | 'map' | 'list' | 'any'

export type PropertyConstraint =
  | { length: { min?: number; max?: number }; description?: string }
  | { range: { min?: number; max?: number }; description?: string }
  | { allowed_values: unknown[]; description?: string }
  | { allowed_pattern: string; description?: string }

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
}

export interface AttributeSchema {
  description: string
  type?: PropertyType
  /** Never shown in API responses or events. */
  secret?: boolean
}

/** What a type needs from the installation (from the env parser, passed in by the worker). */
export interface ResourceTypeConfig {
  /** Directory `Kiln::File` writes into. */
  workspaceDir: string
  /** Server `Kiln::Postgres::Database` creates databases and roles on. */
  targetDatabaseUrl?: string
}

export interface ResourceContext {
  stackId: string
  stackName: string
  resourceName: string
  /** Stable id of this row (a replacement is a new row with a new uuid). */
  resourceUuid: string
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
}

/** What the engine stored after the previous successful action. */
export interface ResourceState {
  physicalId: string | null
  properties: Record<string, unknown>
  attributes: Record<string, unknown>
  /** Plugin-private data returned by the previous action. */
  data: Record<string, unknown>
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
  description: string
  properties: Record<string, PropertySchema>
  attributes: Record<string, AttributeSchema>
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
  /** Verify the resource still exists and is healthy (stack check). Throw if not. */
  check?(ctx: ResourceContext, state: ResourceState): Promise<void>
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
