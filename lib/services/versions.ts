/**
 * Template versions of a stack and their differences: a traversal's
 * template, environment and parameters (hidden values masked), and a diff of
 * two versions (the template's text as a unified diff, the environment the
 * same way, the parameters one by one). What a conflict shows the client
 * whose edit is stale, and what `kiln stack diff` prints.
 */
import { createTwoFilesPatch } from 'diff'
import { isDeepStrictEqual } from 'node:util'
import type { Db } from '../db/client'
import type { StoredTemplateRow } from '../db/queries/preview'
import { resolveVersion, templateRow, traversalOf, type VersionRef } from '../db/queries/versions'
import { NotFoundError, ValidationError } from '../plan/errors'
import { MASK } from '../plan/secrets'
import { UUID } from '../ids'

export interface TemplateVersion {
  templateId: string
  traversalId: string | null
  /** The template as submitted. */
  source: string
  /** The environment, hidden parameters' entries masked. */
  environment: Record<string, unknown>
  /** Every parameter's value (given, from the environment, or the default), hidden ones masked. */
  parameters: Record<string, unknown>
}

export interface ParameterChange {
  name: string
  /** Absent: the parameter is not in that version. A hidden value is masked (its change is still shown). */
  before?: unknown
  after?: unknown
  hidden?: true
}

export interface VersionDiff {
  from: string
  to: string
  /** Unified diff of the template text; '' when the same. */
  template: string
  /** Unified diff of the environment (as JSON, masked); '' when the same. */
  environment: string
  parameters: ParameterChange[]
}

const isHidden = (s: unknown) => !!s && typeof s === 'object' && ((s as { hidden?: unknown }).hidden === true || (s as { hidden?: unknown }).hidden === 'true')
const section = (env: Record<string, unknown>, k: string) => (env[k] && typeof env[k] === 'object' ? (env[k] as Record<string, unknown>) : {})

/** Parameter values by name (as the stack sees them) and which are hidden. */
function parameterValues(t: StoredTemplateRow): Map<string, { value: unknown; hidden: boolean }> {
  const schemas = (t.template.parameters ?? {}) as Record<string, { default?: unknown } | null>
  const env = t.environment
  const out = new Map<string, { value: unknown; hidden: boolean }>()
  for (const [name, s] of Object.entries(schemas)) {
    const sources = [t.parameters, section(env, 'parameters'), section(env, 'parameter_defaults')]
    const given = sources.find((src) => Object.hasOwn(src, name))
    out.set(name, { value: given ? given[name] : (s?.default ?? null), hidden: isHidden(s) })
  }
  return out
}

function maskedEnvironment(t: StoredTemplateRow): Record<string, unknown> {
  const schemas = (t.template.parameters ?? {}) as Record<string, unknown>
  const env = { ...t.environment }
  for (const k of ['parameters', 'parameter_defaults']) {
    if (env[k] && typeof env[k] === 'object') env[k] = Object.fromEntries(Object.entries(env[k] as Record<string, unknown>).map(([n, v]) => [n, isHidden(schemas[n]) ? MASK : v]))
  }
  return env
}

export function versionOf(t: StoredTemplateRow, traversalId: string | null): TemplateVersion {
  const parameters = Object.fromEntries([...parameterValues(t)].map(([n, p]) => [n, p.hidden ? MASK : p.value]))
  return { templateId: t.id, traversalId, source: t.source, environment: maskedEnvironment(t), parameters }
}

export function diffVersions(a: StoredTemplateRow, b: StoredTemplateRow, names: { from: string; to: string }): VersionDiff {
  const patch = (x: string, y: string) => (x === y ? '' : createTwoFilesPatch(names.from, names.to, x.endsWith('\n') ? x : `${x}\n`, y.endsWith('\n') ? y : `${y}\n`, '', '', { context: 3 }))
  const envText = (t: StoredTemplateRow) => (Object.keys(t.environment).length ? JSON.stringify(maskedEnvironment(t), null, 2) : '')
  const pa = parameterValues(a)
  const pb = parameterValues(b)
  const parameters: ParameterChange[] = []
  for (const name of [...new Set([...pa.keys(), ...pb.keys()])].sort()) {
    const x = pa.get(name)
    const y = pb.get(name)
    if (x && y && isDeepStrictEqual(x.value, y.value) && x.hidden === y.hidden) continue
    const hidden = x?.hidden || y?.hidden
    parameters.push({ name, ...(x ? { before: hidden ? MASK : x.value } : {}), ...(y ? { after: hidden ? MASK : y.value } : {}), ...(hidden ? { hidden: true as const } : {}) })
  }
  return { from: names.from, to: names.to, template: patch(a.source, b.source), environment: patch(envText(a), envText(b)), parameters }
}

/** A traversal's template version (the template it converged, or converges, to). */
export async function traversalVersion(db: Db, stackId: string, traversalId: string): Promise<TemplateVersion> {
  const t = await traversalOf(db.pool, stackId, traversalId)
  if (!t) throw new NotFoundError(`traversal ${traversalId} not found`)
  const row = await templateRow(db.pool, stackId, t.templateId)
  if (!row) throw new NotFoundError(`the template of traversal ${traversalId} is gone`)
  return versionOf(row, traversalId)
}


/** The version a traversal id or template id of the stack names; a 400 naming `where` if it names none. */
export async function versionNamed(db: Db, stack: { id: string; name: string }, ref: string, where: string): Promise<VersionRef> {
  const v = UUID.test(ref) ? await resolveVersion(db.pool, stack.id, ref) : null
  if (v) return v
  const message = `${where}: "${ref}" names no traversal or template of stack ${stack.name}`
  throw new ValidationError(message, [{ code: 'structure', path: where, line: null, column: null, message }])
}

/** The diff between two versions of a stack: traversal or template ids, or `current` (the stack's template now). */
export async function diffNamed(db: Db, stack: { id: string; name: string; rawTemplateId: string | null; currentTraversalId: string | null }, from: string, to: string): Promise<VersionDiff> {
  const side = async (ref: string, where: string) => {
    const v = ref === 'current' ? { templateId: stack.rawTemplateId, traversalId: stack.currentTraversalId } : await versionNamed(db, stack, ref, where)
    const row = v.templateId ? await templateRow(db.pool, stack.id, v.templateId) : null
    if (!row) throw new NotFoundError(`${where}: stack ${stack.name} has no template`)
    return row
  }
  return diffVersions(await side(from, 'query.from'), await side(to, 'query.to'), { from, to })
}

/** The version the stack converges to now: its template, and its current traversal (null after a cancel). */
export async function currentVersion(db: Db, stack: { id: string; name: string; rawTemplateId: string | null; currentTraversalId: string | null }): Promise<TemplateVersion> {
  const row = stack.rawTemplateId ? await templateRow(db.pool, stack.id, stack.rawTemplateId) : null
  if (!row) throw new NotFoundError(`stack ${stack.name} has no template`)
  return versionOf(row, stack.currentTraversalId)
}
