/** What the stack operations take and answer, and what they share. */
import type { Db } from '../../db/client'
import type { StackRecord } from '../../db/queries/stacks'
import type { StackAction } from '../../engine/types'
import type { Limits, Submission } from '../../plan/template-check'
import type { ResourceType } from '../../resources/types'
import type { TypeCatalog } from '../../template/types'

export type { StackRecord }

export interface Actor {
  projectId: string
  /** Who asked (token name), recorded on the traversal. */
  name: string
}

/** The resources every stack system shares. */
export interface StackResources {
  db: Db
  catalog: TypeCatalog
  /** Resource types (property schemas for previews). */
  types: { get(name: string): ResourceType | undefined }
  limits: Limits
  defaultTimeoutMins: number
}

/** What createStackService is built from: the systems' shared resources. */
export type ServiceDeps = StackResources

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
