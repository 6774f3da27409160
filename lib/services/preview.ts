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
 */
import type pg from 'pg'
import { changedProperties, needsReplacement, validateProperties } from '../resources/schema'
import type { ResourceType } from '../resources/types'
import { buildDefinition, parseEnvironment, parseTemplate, resolveProperties } from '../template'
import { UNKNOWN, type ResolveContext, type StackDefinition } from '../template/types'
import type { StackRecord } from './stacks'

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

function topoNames(def: StackDefinition): string[] {
  const remaining = new Map(Object.entries(def.resources).map(([n, r]) => [n, r.dependsOn.filter((d) => d in def.resources).length]))
  const dependents = new Map<string, string[]>()
  for (const [n, r] of Object.entries(def.resources)) for (const d of r.dependsOn) dependents.set(d, [...(dependents.get(d) ?? []), n])
  const queue = [...remaining].filter(([, c]) => c === 0).map(([n]) => n)
  const out: string[] = []
  while (queue.length) {
    const n = queue.shift()!
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

export async function previewUpdate(
  pool: pg.Pool,
  stack: StackRecord,
  next: StackDefinition,
  types: { get(name: string): ResourceType | undefined },
): Promise<PreviewResult> {
  let target: StackDefinition | null = null
  if (stack.rawTemplateId) {
    const { rows } = await pool.query('SELECT source, environment, parameters FROM raw_template WHERE id = $1', [stack.rawTemplateId])
    if (rows[0]) {
      target = buildDefinition(parseTemplate(rows[0].source), {
        environment: parseEnvironment(rows[0].environment),
        parameters: rows[0].parameters,
        stackName: stack.name,
        stackId: stack.id,
        projectId: stack.projectId,
      })
    }
  }
  const { rows: live } = await pool.query<LiveRow>(
    `SELECT id, name, type, action, status, physical_id, attributes, replaced_by, current_template_id FROM resource
      WHERE stack_id = $1 AND NOT (action = 'DELETE' AND status = 'COMPLETE') ORDER BY id`,
    [stack.id],
  )
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
    const oldProps = resolveProperties(target!, name, ctx)
    const newProps = resolveProperties(next, name, ctx)
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
