/**
 * Preview of an update: which resources would be created, updated in place,
 * replaced or deleted. Computed against the *in-flight target* — the template
 * the current traversal converges to — so that a preview taken while an update
 * runs describes what the new update changes relative to where the stack is
 * heading, not to a half-converged state.
 *
 * Like Heat's preview it cannot be certain: a value that depends on a
 * resource being created or replaced is unknown until then (`uncertain`), and
 * a resource type may still ask for replacement at run time.
 *
 * The database is read here; the rest (checking the new template, building
 * the target's definition, comparing) is template evaluation and runs on an
 * evaluation thread (lib/evaluation), under the budgets.
 */
import type pg from 'pg'
import { evaluation } from '../evaluation/pool'
import type { StoredTemplate } from '../evaluation/tasks'
import { changedProperties, needsReplacement, validateProperties } from '../resources/schema'
import type { PropertySchema } from '../resources/types'
import { resolveProperties } from '../template'
import type { Budget } from '../template/budget'
import { UNKNOWN, type PortableDefinition, type ResolveContext } from '../template/types'
import type { StackRecord } from './stacks'
import { portable, type CheckContext, type Submission } from './templates'

export type PreviewAction = 'create' | 'update' | 'replace' | 'delete' | 'unchanged'

export interface PreviewItem {
  name: string
  type: string
  action: PreviewAction
  reason?: string
  /** top-level properties whose value changes */
  changed?: string[]
  /** some new values depend on resources that do not exist yet */
  uncertain?: boolean
}

export interface PreviewResult {
  stack: { id: string; name: string }
  /** What the preview compares against. */
  against: { templateId: string | null; traversalId: string | null; inFlight: boolean }
  items: PreviewItem[]
  summary: Record<PreviewAction, number>
}

interface LiveRow {
  id: number
  name: string
  type: string
  action: string
  status: string
  physical_id: string | null
  attributes: Record<string, unknown> | null
  replaced_by: number | null
  current_template_id: string | null
}

/** What computePreview compares: the new definition, the in-flight target's, and the rows. */
export interface PreviewInput {
  stack: Pick<StackRecord, 'id' | 'name' | 'rawTemplateId' | 'currentTraversalId' | 'status'>
  next: Pick<PortableDefinition, 'resources'>
  target: Pick<PortableDefinition, 'resources'> | null
  live: LiveRow[]
}

type Schemas = { get(name: string): { properties: Record<string, PropertySchema>; acceptsAnyProperties: boolean } | undefined }

function topoNames(def: Pick<PortableDefinition, 'resources'>): string[] {
  const remaining = new Map(Object.entries(def.resources).map(([n, r]) => [n, r.dependsOn.filter((d) => d in def.resources).length]))
  const dependents = new Map<string, string[]>()
  for (const [n, r] of Object.entries(def.resources)) for (const d of r.dependsOn) (dependents.get(d) ?? dependents.set(d, []).get(d)!).push(n)
  const queue = [...remaining].filter(([, c]) => c === 0).map(([n]) => n)
  const out: string[] = []
  for (let i = 0; i < queue.length; i++) {
    const n = queue[i]!
    out.push(n)
    for (const m of dependents.get(n) ?? []) {
      const left = remaining.get(m)! - 1
      remaining.set(m, left)
      if (left === 0) queue.push(m)
    }
  }
  return out
}

function containsUnknown(v: unknown): boolean {
  if (v === UNKNOWN) return true
  if (Array.isArray(v)) return v.some(containsUnknown)
  if (v && typeof v === 'object') return Object.values(v).some(containsUnknown)
  return false
}

/** Read what a preview compares against, then compare on an evaluation thread. */
export async function previewUpdate(pool: pg.Pool, stack: StackRecord, sub: Submission, check: CheckContext): Promise<PreviewResult> {
  let target: StoredTemplate | null = null
  if (stack.rawTemplateId) {
    const { rows } = await pool.query('SELECT source, template, environment, parameters FROM raw_template WHERE id = $1', [stack.rawTemplateId])
    const t = rows[0]
    // The parsed JSON where one was stored (reading it back is cheaper than the text); `{}` for a delete.
    if (t) target = { source: t.template && Object.keys(t.template).length ? null : t.source, parsed: t.template, environment: t.environment, parameters: t.parameters, stackName: stack.name, stackId: stack.id, projectId: stack.projectId }
  }
  const { rows: live } = await pool.query<LiveRow>(
    `SELECT id, name, type, action, status, physical_id, attributes, replaced_by, current_template_id FROM resource
      WHERE stack_id = $1 AND NOT (action = 'DELETE' AND status = 'COMPLETE') ORDER BY id`,
    [stack.id],
  )
  const preview = { stack: { id: stack.id, name: stack.name, rawTemplateId: stack.rawTemplateId, currentTraversalId: stack.currentTraversalId, status: stack.status }, live }
  return (await evaluation().run({ kind: 'preview', sub, ctx: portable(check), preview, target })) as PreviewResult
}

export function computePreview(input: PreviewInput, types: Schemas, budget: Budget): PreviewResult {
  const { stack, next, target, live } = input
  // The row a name is bound to: prefer one at the target template and not replaced.
  const rowOf = new Map<string, LiveRow>()
  for (const r of live) {
    const cur = rowOf.get(r.name)
    const score = (x: LiveRow) => (x.current_template_id === stack.rawTemplateId ? 10 : 0) - (x.replaced_by ? 1 : 0) - (x.status === 'FAILED' ? 30 : 0) - (x.action === 'DELETE' ? 50 : 0)
    if (!cur || score(r) > score(cur) || (score(r) === score(cur) && r.id > cur.id)) rowOf.set(r.name, r)
  }

  const fresh = new Set<string>() // created or replaced by this update: values unknown until then
  const ctx: ResolveContext = {
    getResource: (n) => (fresh.has(n) || !rowOf.get(n)?.physical_id ? UNKNOWN : rowOf.get(n)!.physical_id),
    getAttr: (n, a) => (fresh.has(n) || !rowOf.get(n) ? UNKNOWN : (rowOf.get(n)!.attributes?.[a] ?? null)),
  }
  const items: PreviewItem[] = []
  for (const name of topoNames(next)) {
    const def = next.resources[name]!
    const row = rowOf.get(name)
    const before = target?.resources[name]
    const item = (action: PreviewAction, extra: Partial<PreviewItem> = {}) => {
      if (action === 'create' || action === 'replace') fresh.add(name)
      items.push({ name, type: def.type, action, ...extra })
    }
    if (!row || row.action === 'INIT' || !before) {
      item('create', row && !before ? { reason: 'the current operation removes it; it will be created again' } : {})
      continue
    }
    if (row.status === 'FAILED') {
      item('replace', { reason: `${row.action}_FAILED resources are replaced` })
      continue
    }
    if (before.type !== def.type) {
      item('replace', { reason: `type changes from ${before.type} to ${def.type}` })
      continue
    }
    const type = types.get(def.type)
    const oldProps = resolveProperties(target!, name, ctx, budget)
    const newProps = resolveProperties(next, name, ctx, budget)
    const uncertain = containsUnknown(newProps)
    const schema = type?.properties ?? {}
    const norm = (p: Record<string, unknown>) => (type ? validateProperties(schema, p, { skip: containsUnknown, acceptUnknown: type.acceptsAnyProperties === true }).value : p)
    const changed = changedProperties(norm(oldProps), norm(newProps))
    const blocked = type ? needsReplacement(schema, changed) : []
    if (blocked.length) item('replace', { changed, uncertain, reason: `${blocked.join(', ')} cannot be updated in place` })
    else if (changed.length) item('update', { changed, uncertain })
    else item('unchanged')
  }
  const names = new Set(Object.keys(next.resources))
  const gone = new Set<string>([...Object.keys(target?.resources ?? {}), ...rowOf.keys()].filter((n) => !names.has(n)))
  for (const name of [...gone].sort()) items.push({ name, type: rowOf.get(name)?.type ?? target?.resources[name]?.type ?? 'unknown', action: 'delete' })

  const summary: Record<PreviewAction, number> = { create: 0, update: 0, replace: 0, delete: 0, unchanged: 0 }
  for (const i of items) summary[i.action]++
  return {
    stack: { id: stack.id, name: stack.name },
    against: { templateId: stack.rawTemplateId, traversalId: stack.currentTraversalId, inFlight: stack.status === 'IN_PROGRESS' },
    items,
    summary,
  }
}
