/**
 * No accidental overwrite. An update may name the template version it was
 * written against: `expect` (a traversal id or a template id of the stack)
 * or `If-Match` with the ETag `GET /api/stacks/{id}` returns (the template
 * id). When the stack has moved to another template since (another update,
 * a rollback), the update is refused with 409 and what changed meanwhile: the
 * traversals started since, and a diff of the templates and parameters. To
 * supersede a running update knowingly, a client names the version it runs
 * (what it saw). Kiln's REST API also answers an unchanged submission with
 * "no changes" and starts nothing, unless asked to (`force`).
 *
 * Heat's API has no `expect` and starts every update it is sent, as Heat does.
 */
import { isDeepStrictEqual } from 'node:util'
import type { Db } from '../db/client'
import { templateRow, traversalsSince, type TraversalSummary, type VersionRef } from '../db/queries/versions'
import { ConflictError } from '../plan/errors'
import type { CheckedSubmission } from '../plan/template-check'
import { diffVersions, versionNamed } from './versions'

export interface UpdateGuard {
  /** A traversal or template id of the stack: the version the edit was written against. */
  expect?: string
  /** Where `expect` came from, for messages (`body.expect`, `If-Match`). */
  expectFrom?: string
  /** Answer an unchanged submission with "no changes" instead of starting a traversal. */
  skipUnchanged?: boolean
}

/** What the guard reads of a stack. */
export interface GuardedStack {
  id: string
  name: string
  action: string
  status: string
  currentTraversalId: string | null
  rawTemplateId: string | null
  timeoutMins: number
  disableRollback: boolean
}

const short = (id: string | null) => (id ? id.slice(0, 8) : 'none')

/** The version `expect` names; a 400 naming where it came from if it names none of the stack's. */
export const expectedVersion = (db: Db, stack: GuardedStack, expect: string, from = 'body.expect'): Promise<VersionRef> => versionNamed(db, stack, expect, from)

const KIND: Record<string, string> = { CREATE: 'a create', UPDATE: 'an update', ROLLBACK: 'a rollback', DELETE: 'a delete', CHECK: 'a check' }

/** "an update by alice (running), a rollback by automatic rollback (COMPLETE)" */
export function describeTraversals(list: TraversalSummary[]): string {
  if (!list.length) return 'no operation started since, but the stack is at another template'
  return list.map((t) => `${KIND[t.action] ?? t.action.toLowerCase()} by ${t.startedBy || 'someone'} (${t.outcome ?? 'running'}, traversal ${short(t.id)})`).join(', ')
}

/**
 * The stack is not at the version an edit (or a plan) was written against:
 * a 409 with the operations started since and the diff from that version to
 * the stack's current one.
 */
export async function staleConflict(db: Db, stack: GuardedStack, expected: VersionRef, what = 'this edit'): Promise<ConflictError> {
  const since = (await traversalsSince(db.pool, stack.id, expected.traversalId)).filter((t) => t.id !== expected.traversalId)
  const from = await templateRow(db.pool, stack.id, expected.templateId)
  const to = stack.rawTemplateId ? await templateRow(db.pool, stack.id, stack.rawTemplateId) : null
  const diff = from && to ? diffVersions(from, to, { from: `template ${short(from.id)} (what ${what} was written against)`, to: `template ${short(to.id)} (current)` }) : null
  const message =
    `stack ${stack.name} changed since the version ${what} was written against (template ${short(expected.templateId)}): ${describeTraversals(since)}. ` +
    `Review the changes, then rebase ${what} on template ${short(stack.rawTemplateId)}, or send expect: ${stack.currentTraversalId ?? stack.rawTemplateId} to supersede it knowingly.`
  return new ConflictError(message, {
    expected,
    current: { templateId: stack.rawTemplateId, traversalId: stack.currentTraversalId, action: stack.action, status: stack.status },
    since,
    diff,
  })
}

/**
 * Whether a submission is what the stack already converges to: the same
 * template, environment and parameters, no setting changed, and nothing
 * failed (a failed stack's resubmission is a retry).
 */
export async function isUnchanged(db: Db, stack: GuardedStack, checked: CheckedSubmission, settings: { timeoutMins?: number; disableRollback?: boolean }): Promise<boolean> {
  if (stack.status === 'FAILED' || !stack.rawTemplateId) return false
  if (settings.timeoutMins !== undefined && settings.timeoutMins !== stack.timeoutMins) return false
  if (settings.disableRollback !== undefined && settings.disableRollback !== stack.disableRollback) return false
  const t = await templateRow(db.pool, stack.id, stack.rawTemplateId)
  if (!t) return false
  return isDeepStrictEqual(JSON.parse(checked.templateText), t.template) && isDeepStrictEqual(checked.environmentJson, t.environment) && isDeepStrictEqual(checked.parameters, t.parameters)
}
