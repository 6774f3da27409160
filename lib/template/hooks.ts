/**
 * Heat's hooks (breakpoints): an environment names resources, by name or
 * by a shell-style pattern, at which a traversal stops before it acts on
 * them, until someone clears the hook (heat/engine/environment.py,
 * ResourceRegistry.matches_hook):
 *
 *   resource_registry:
 *     resources:
 *       db:        {hooks: pre-create}
 *       "web_*":   {hooks: [pre-create, pre-update]}
 *
 * Kiln honours the `pre-` hooks. The `post-` hooks (after the action, before
 * the dependents start) and hooks in nested stacks are refused when the
 * environment is read, never ignored.
 */
import type { IssueList } from './issues'
import type { HookRule, HookType } from './types'

export type { HookRule, HookType }
export const HOOK_TYPES: readonly HookType[] = ['pre-create', 'pre-update', 'pre-delete']
const HEAT_ONLY_HOOKS = ['post-create', 'post-update', 'post-delete']

export const isHookType = (v: unknown): v is HookType => typeof v === 'string' && (HOOK_TYPES as readonly string[]).includes(v)

/** `resource_registry.resources`: the hooks of each entry; anything else in it is an issue. */
export function readHookRules(resources: Record<string, unknown>, issues: IssueList): HookRule[] {
  const at = (...p: string[]) => ['resource_registry', 'resources', ...p]
  const rules: HookRule[] = []
  for (const [pattern, entry] of Object.entries(resources)) {
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) {
      issues.add('structure', at(pattern), 'an entry of resource_registry.resources must be a map, such as {hooks: pre-create}')
      continue
    }
    const e = entry as Record<string, unknown>
    const others = Object.keys(e).filter((k) => k !== 'hooks')
    if (others.length) {
      const nested = others.every((k) => e[k] !== null && typeof e[k] === 'object' && !Array.isArray(e[k]))
      issues.add(
        'structure',
        at(pattern, others[0]!),
        nested
          ? 'hooks in nested stacks are not supported: Kiln has no nested stacks yet'
          : 'per-resource type overrides are not supported; only hooks may be set per resource (alias the type for the whole stack instead)',
      )
      continue
    }
    const raw = e.hooks
    const list = typeof raw === 'string' ? [raw] : Array.isArray(raw) ? raw : null
    if (!list) {
      issues.add('structure', at(pattern, 'hooks'), `hooks must be one of ${HOOK_TYPES.join(', ')} or a list of them`)
      continue
    }
    const hooks: HookType[] = []
    list.forEach((h, i) => {
      const where = Array.isArray(raw) ? at(pattern, 'hooks', String(i)) : at(pattern, 'hooks')
      if (isHookType(h)) {
        if (!hooks.includes(h)) hooks.push(h)
      } else if (typeof h === 'string' && HEAT_ONLY_HOOKS.includes(h)) {
        issues.add('structure', where, `the ${h} hook is not supported: Kiln stops only before an action (${HOOK_TYPES.join(', ')})`)
      } else {
        issues.add('structure', where, `"${String(h)}" is not a hook; valid hooks are ${HOOK_TYPES.join(', ')}`)
      }
    })
    if (hooks.length) rules.push({ pattern, hooks })
  }
  return rules
}

/** The hooks the rules set on a resource. */
export function hooksOf(rules: readonly HookRule[] | undefined, resourceName: string): HookType[] {
  const out = new Set<HookType>()
  for (const r of rules ?? []) if (globMatch(r.pattern, resourceName)) for (const h of r.hooks) out.add(h)
  return [...out]
}

/**
 * Python's fnmatchcase: `*` any run, `?` one character, `[abc]`, `[a-z]`,
 * `[!abc]` one of (or none of) a set; everything else literal. Matched in
 * O(pattern × name) steps with one saved position per `*` (a regular
 * expression with many `.*` can backtrack for a very long time, and the
 * pattern is a tenant's).
 */
export function globMatch(pattern: string, name: string): boolean {
  const p = [...pattern]
  const s = [...name]
  let i = 0
  let j = 0
  let star = -1
  let mark = 0
  while (j < s.length) {
    if (i < p.length && p[i] === '*') {
      star = i++
      mark = j
      continue
    }
    const step = i < p.length ? matchOne(p, i, s[j]!) : null
    if (step !== null) {
      i = step
      j++
    } else if (star >= 0) {
      i = star + 1
      j = ++mark
    } else return false
  }
  while (i < p.length && p[i] === '*') i++
  return i === p.length
}

/** If p[i] (a literal, `?` or a `[…]` set) matches c, the index after it; else null. */
function matchOne(p: string[], i: number, c: string): number | null {
  if (p[i] === '?') return i + 1
  if (p[i] !== '[') return p[i] === c ? i + 1 : null
  let k = i + 1
  const negate = p[k] === '!'
  if (negate) k++
  const first = k
  let hit = false
  // A `]` right after `[` or `[!` is a member, as in Python.
  while (k < p.length && (p[k] !== ']' || k === first)) {
    if (p[k + 1] === '-' && k + 2 < p.length && p[k + 2] !== ']') {
      if (p[k]! <= c && c <= p[k + 2]!) hit = true
      k += 3
    } else {
      if (p[k] === c) hit = true
      k++
    }
  }
  // No closing `]`: the `[` is literal.
  if (k >= p.length) return c === '[' ? i + 1 : null
  return hit !== negate ? k + 1 : null
}

/** The signal handle a node at a hook waits on: one per hook, traversal and resource name (the API clears hooks by name); kiln_clear_hook (54_node_hook.sql) builds the same. */
export const hookHandle = (hook: HookType, traversalId: string, resourceName: string) => `hook ${hook} ${traversalId} ${resourceName}`
