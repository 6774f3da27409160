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
  /** `repair`: the update runs even with no property changed (a failed row, or a drifted object, is put right in place). */
  | { kind: 'update'; changed: string[]; repair?: boolean }
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
  // Without a look at the object, a failed row is not trusted: replace it (Heat's default needs_replace_failed).
  // decideObserved decides after a look.
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
  if (stackAction === 'DRIFT') return null
  if (isUpdate) return row.action === 'INIT' ? 'CREATE' : null
  return row.currentTemplateId === traversalTemplateId ? null : 'DELETE'
}

/** What the node decision needs of a resource type: which properties it can update in place, and its own replace rule. */
export interface TypeRules {
  properties: Record<string, PropertySchema>
  replaceOnUpdate?: ResourceType['replaceOnUpdate']
  replaceOnEveryUpdate?: boolean
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
 * a preview passes the ones it knows (or suspects) change. `observed` is
 * what the node saw of the object when it looked (decideObserved); `prev` is
 * then the object as seen. `atTemplate`: the row is already at the
 * traversal's template (this traversal made or updated it): a type replaced
 * at every update is not replaced again.
 */
export function decideNode(
  row: RowState,
  newType: string,
  rules: TypeRules,
  props: Record<string, unknown>,
  prev: ResourceState,
  changed: string[] = row.properties ? changedProperties(row.properties, props) : Object.keys(props),
  observed?: { seen: SeenObject; converge: boolean },
  atTemplate = false,
): UpdateDecision {
  if (createsAgain(row)) return { kind: 'create' }
  const inputs = { row, newType, newProperties: props, changed, notUpdatable: needsReplacement(rules.properties, changed) }
  const decision = observed ? decideObserved(inputs, observed.seen, { converge: observed.converge }) : decideUpdate(inputs)
  if (rules.replaceOnEveryUpdate && !atTemplate && (decision.kind === 'noop' || decision.kind === 'update')) return { kind: 'replace', reason: `${newType} is replaced at every update of its stack` }
  if (decision.kind !== 'update') return decision
  const why = rules.replaceOnUpdate?.(props, prev, decision.changed)
  return why ? { kind: 'replace', reason: why } : decision
}

/**
 * What the resource type's `observe` saw of a row's object, summarised for a
 * decision (the caller compares: lib/engine/drift.ts).
 */
export type SeenObject =
  | { state: 'gone' }
  | {
      state: 'exists'
      /** Properties whose new value differs from the object as seen (seen values over the stored ones). */
      changed: string[]
      /** The subset of `changed` that cannot be updated in place. */
      notUpdatable: string[]
      /** What the type found wrong beyond the properties. */
      problems: string[]
      /** For a FAILED row: the type's needs_replace_failed answer (a reason to replace), else null. */
      replaceFailed: string | null
    }

/**
 * decideUpdate after a look at the object: Heat's needs_replace_failed for a
 * FAILED row (also one whose lock was broken after its worker died), and
 * `converge` (the object as seen, not as stored, is what the new definition
 * is compared with). `seen` is null when nothing was observed (the type
 * cannot observe, or it has no needs_replace_failed and the update does not
 * converge): the decision is then decideUpdate's.
 *
 *   - the object is gone: replaced (a new one is made);
 *   - a FAILED row whose object exists: updated in place, even with nothing
 *     changed, unless the type asks for a replacement or a changed property
 *     cannot be updated in place;
 *   - converging: updated in place when the object differs from the new
 *     definition or has problems, left alone when it matches.
 */
export function decideObserved(i: UpdateInputs, seen: SeenObject | null, opts: { converge: boolean }): UpdateDecision {
  const { row } = i
  if (seen === null || row.action === 'INIT' || row.action === 'DELETE' || row.type !== i.newType) return decideUpdate(i)
  if (row.status !== 'FAILED' && !opts.converge) return decideUpdate(i)
  if (seen.state === 'gone') return { kind: 'replace', reason: 'the object is gone (observed)' }
  if (row.status === 'FAILED' && seen.replaceFailed) return { kind: 'replace', reason: `${row.action}_FAILED resource is replaced: ${seen.replaceFailed}` }
  if (seen.notUpdatable.length) return { kind: 'replace', reason: `update of ${seen.notUpdatable.join(', ')} requires replacement` }
  if (row.status === 'FAILED') return { kind: 'update', changed: seen.changed, repair: true }
  if (!seen.changed.length && !seen.problems.length) return { kind: 'noop' }
  return { kind: 'update', changed: seen.changed, repair: true }

}
