/**
 * What several groups of Kiln's routes share: the answer to an operation
 * (202, or 200 with "no changes"), an update's guard, a preview's body, and
 * the checks of ids in a path (anything that is not one names nothing: 404).
 */
import { ValidationError } from '../../plan/errors'
import { HttpError, json, parse } from '../http'
import { PreviewBody, UPDATE_ONLY_FIELDS } from '../schemas'
import { expectedFrom } from '../versioning'

/** An operation's answer: 202 (or `status`) with the traversal it started; 200 when there was nothing to change. */
export function accepted(res: { stack: { id: string; name: string }; traversalId: string | null; action: string; superseded: string | null; noChanges?: true; templateId?: string }, status = 202): Response {
  return res.noChanges
    ? json({ stack: res.stack, action: res.action, traversalId: null, superseded: null, noChanges: true, message: 'no changes: the stack already converges to this template, environment and parameters; nothing was started (send force: true to start an update anyway)' }, 200)
    : json({ stack: res.stack, action: res.action, traversalId: res.traversalId, superseded: res.superseded, ...(res.templateId ? { templateId: res.templateId } : {}) }, status)
}

/** An update request's guard: the version it was written against (body.expect or If-Match), and "no changes" unless forced. */
export function guardOf(req: Request, b: { expect?: string | undefined; force?: boolean | undefined }) {
  const expected = expectedFrom(b.expect, req.headers.get('if-match'))
  return { ...expected, skipUnchanged: b.force !== true }
}

/** A body field that is valid but not honoured where it was sent: a 400 naming it, never silently ignored. */
export function refused(field: string, message: string): ValidationError {
  return new ValidationError(`body.${field}: ${message}`, [{ code: 'structure', path: `body.${field}`, line: null, column: null, message }])
}

/** Why a preview or a plan refuses a field only an update honours. */
const UPDATE_ONLY_REASONS: Record<(typeof UPDATE_ONLY_FIELDS)[number], string> = {
  converge: 'a preview does not observe resources; run a drift check (POST /api/stacks/{stack}/drift) to see what converge would bring back',
  preempt: 'a preview stops nothing; send preempt with the update itself',
  tags: 'a preview changes no tags; send them with the update itself',
}

/** A preview's or a plan's body: the update-only fields are refused by name, with the reason, before the strict parse. */
export function previewBody(raw: unknown) {
  if (raw && typeof raw === 'object') {
    for (const f of UPDATE_ONLY_FIELDS) if (f in raw) throw refused(f, UPDATE_ONLY_REASONS[f])
  }
  return parse(PreviewBody, raw)
}

/** A resource row id in a path: anything else names no row. */
export function rowId(v: string): number {
  if (!/^\d{1,10}$/.test(v) || Number(v) > 2 ** 31 - 1) throw new HttpError(404, 'not_found', `resource row ${v} not found`)
  return Number(v)
}

/** A snapshot's name in a path (a PostgreSQL database name Kiln makes): anything else names none. */
export function snapshotName(v: string): string {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(v)) throw new HttpError(404, 'not_found', `snapshot ${v.slice(0, 80)} not found`)
  return v
}

export function uuid(v: string, what: string): string {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(v)) throw new HttpError(404, 'not_found', `${what} ${v} not found`)
  return v
}
