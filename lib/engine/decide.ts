/**
 * What a node must do to its row — pure decisions, taken after the row is
 * locked and the node's inputs are known. Mirrors Heat's
 * `check_resource_update` / `_needs_update` / `delete_convergence`.
 */
import { changedProperties, needsReplacement } from '../resources/schema'
import type { PropertySchema, ResourceState, ResourceType } from '../resources/types'
import type { ResourceAction, ResourceStatus } from './types'

export interface RowState {
  action: ResourceAction
  status: ResourceStatus
  type: string
  properties: Record<string, unknown> | null
  currentTemplateId: string | null
  deletionPolicy: string
}

export type UpdateDecision =
  | { kind: 'create' }
  | { kind: 'noop' }
  | { kind: 'update'; changed: string[] }
  | { kind: 'replace'; reason: string }

export interface UpdateInputs {
  row: RowState
  newType: string
  /** resolved, validated and defaulted properties of the new definition */
  newProperties: Record<string, unknown>
  /** top-level property names whose value differs */
  changed: string[]
  /** the subset of `changed` that cannot be updated in place */
  notUpdatable: string[]
}

export function decideUpdate(i: UpdateInputs): UpdateDecision {
  const { row } = i
  if (row.action === 'INIT') return { kind: 'create' }
  // A failed row is never trusted: replace it (Heat's needs_replace_failed).
  if (row.status === 'FAILED') return { kind: 'replace', reason: `${row.action}_FAILED resource is replaced` }
  if (row.action === 'DELETE') return { kind: 'replace', reason: 'the resource was deleted' }
  if (row.type !== i.newType) return { kind: 'replace', reason: `type changed from ${row.type} to ${i.newType}` }
  if (i.changed.length === 0) return { kind: 'noop' }
  if (i.notUpdatable.length) return { kind: 'replace', reason: `update of ${i.notUpdatable.join(', ')} requires replacement` }
  return { kind: 'update', changed: i.changed }
}

export type CleanupDecision =
  | { kind: 'noop'; reason: string }
  /** never created: just mark the row deleted */
  | { kind: 'forget' }
  /** deletion_policy Retain: leave the physical resource, drop it from the stack */
  | { kind: 'retain' }
  | { kind: 'delete' }

export function decideCleanup(row: RowState, traversalTemplateId: string): CleanupDecision {
  if (row.currentTemplateId === traversalTemplateId) return { kind: 'noop', reason: 'already at the traversal template' }
  if (row.action === 'DELETE' && row.status === 'COMPLETE') return { kind: 'noop', reason: 'already deleted' }
  if (row.action === 'INIT') return { kind: 'forget' }
  if (row.deletionPolicy === 'Retain') return { kind: 'retain' }
  return { kind: 'delete' }
}

/** The action recorded while a node works on its row (shown as `<ACTION>_IN_PROGRESS`). */
export function predictedAction(row: Pick<RowState, 'action' | 'currentTemplateId'>, isUpdate: boolean, traversalTemplateId: string, stackAction: string): ResourceAction | null {
  if (stackAction === 'CHECK') return 'CHECK'
  if (isUpdate) return row.action === 'INIT' ? 'CREATE' : null
  return row.currentTemplateId === traversalTemplateId ? null : 'DELETE'
}

/** What the node decision needs of a resource type: which properties it can update in place, and its own replace rule. */
export interface TypeRules {
  properties: Record<string, PropertySchema>
  replaceOnUpdate?: ResourceType['replaceOnUpdate']
}

/**
 * A row whose create never stored a result (INIT, or CREATE_FAILED before it
 * stored any properties) is created again in place, not replaced.
 */
export function createsAgain(row: Pick<RowState, 'action' | 'status' | 'properties'>): boolean {
  return row.action === 'INIT' || (row.action === 'CREATE' && row.status === 'FAILED' && row.properties === null)
}

/**
 * Everything an update node decides about its row before it acts: create it,
 * leave it, update it in place or replace it. The worker's node run
 * (check-resource.ts) acts on this; a preview asks the very same question.
 * `changed` defaults to the properties whose value differs from the row's;
 * a preview passes the ones it knows (or suspects) change.
 */
export function decideNode(
  row: RowState,
  newType: string,
  rules: TypeRules,
  props: Record<string, unknown>,
  prev: ResourceState,
  changed: string[] = row.properties ? changedProperties(row.properties, props) : Object.keys(props),
): UpdateDecision {
  if (createsAgain(row)) return { kind: 'create' }
  const decision = decideUpdate({ row, newType, newProperties: props, changed, notUpdatable: needsReplacement(rules.properties, changed) })
  if (decision.kind !== 'update') return decision
  const why = rules.replaceOnUpdate?.(props, prev, decision.changed)
  return why ? { kind: 'replace', reason: why } : decision
}
