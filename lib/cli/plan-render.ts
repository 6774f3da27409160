/**
 * A preview (or a saved plan) as the CLI prints it, in the style users know
 * from `terraform plan`:
 *
 *     # network will be updated in place
 *     ~ network (OS::Heat::TestResource)
 *         ~ value: "net-a" -> "net-b"
 *
 *     # port3 will be replaced: update_replace is set
 *   -/+ port3 (OS::Heat::TestResource)
 *         ~ update_replace: false -> true
 *
 * `+` create, `~` update in place, `-/+` replace, `-` delete; a value that
 * depends on what this update does reads `(known after apply)`.
 * Plain text; the caller makes it terminal-safe.
 */
import type { OutputChange, PreviewItem, PreviewResult, PropertyChange, ValueChange } from '../plan/preview-types'
import type { ParameterChange, VersionDiff } from '../services/versions'

const SIGN: Record<PreviewItem['action'], string> = { create: '+', update: '~', replace: '-/+', delete: '-', unchanged: ' ' }
const WHAT: Record<PreviewItem['action'], string> = { create: 'created', update: 'updated in place', replace: 'replaced', delete: 'deleted', unchanged: 'unchanged' }
const KNOWN_AFTER = '(known after apply)'

const show = (v: unknown) => (v === undefined ? 'null' : JSON.stringify(v))

function changeLine(c: ValueChange & { forcesReplacement?: true }, indent: string): string {
  const has = (k: 'before' | 'after') => k in c || (k === 'before' ? c.beforeUnknown : c.afterUnknown)
  const before = c.beforeUnknown ? '(known after the running update)' : show(c.before)
  const after = c.afterUnknown ? KNOWN_AFTER : show(c.after)
  const path = c.path || 'value'
  const line = !has('before') ? `+ ${path}: ${after}` : !has('after') ? `- ${path}: ${before}` : `~ ${path}: ${before} -> ${after}`
  return `${indent}${line}${c.forcesReplacement ? '  # forces replacement' : ''}`
}

function itemBlock(i: PreviewItem): string[] {
  const may = i.certain ? 'will be' : 'may be'
  const head = `  # ${i.name} ${may} ${WHAT[i.action]}${i.reason ? `: ${i.reason}` : ''}${i.pending ? ' (the running update has not reached it yet)' : ''}`
  const type = i.fromType ? `${i.fromType} -> ${i.type}` : i.type
  const lines = [head, `${SIGN[i.action].padStart(3)} ${i.name} (${type})`]
  for (const c of i.changes ?? []) lines.push(changeLine(c as PropertyChange, '      '))
  if (i.moreChanges) lines.push(`      … and ${i.moreChanges} more`)
  if (i.olderRows) lines.push(`      (also removes ${i.olderRows} older row${i.olderRows > 1 ? 's' : ''} of ${i.name})`)
  return [...lines, '']
}

function outputLines(outputs: OutputChange[]): string[] {
  const changed = outputs.filter((o) => o.action !== 'unchanged')
  if (!changed.length) return []
  const out = ['Changes to outputs:']
  for (const o of changed) {
    const sign = o.action === 'create' ? '+' : o.action === 'delete' ? '-' : '~'
    const list = o.changes ?? []
    if (list.length === 1 && list[0]!.path === '') out.push(`  ${sign} ${o.name}: ${changeLine(list[0]!, '').replace(/^[-+~] value: /, '')}${o.certain ? '' : '  (may change)'}`)
    else {
      out.push(`  ${sign} ${o.name}${o.certain ? '' : '  (may change)'}`)
      for (const c of list) out.push(changeLine(c, '      '))
    }
    if (o.error) out.push(`      (cannot be computed: ${o.error})`)
  }
  return [...out, '']
}

export function renderPreview(p: PreviewResult): string {
  const against = p.against.inFlight ? ' (compared with where the running update is heading)' : ''
  const changing = p.items.filter((i) => i.action !== 'unchanged')
  const conditions = p.conditions.filter((c) => c.before !== c.after)
  const lines: string[] = []
  if (!changing.length && !conditions.length && !p.outputs.some((o) => o.action !== 'unchanged')) {
    return `No changes. Stack ${p.stack.name} already converges to this template${against}.`
  }
  lines.push(`Kiln will perform these actions on stack ${p.stack.name}${against}:`, '')
  for (const i of changing) lines.push(...itemBlock(i))
  if (conditions.length) {
    lines.push('Conditions:')
    for (const c of conditions) lines.push(`  ~ ${c.name}: ${c.before ?? '(none)'} -> ${c.after ?? '(none)'}`)
    lines.push('')
  }
  lines.push(...outputLines(p.outputs))
  const s = p.summary
  lines.push(`Plan: ${s.create} to create, ${s.update} to update, ${s.replace} to replace, ${s.delete} to delete, ${s.unchanged} unchanged${s.uncertain ? ` (${s.uncertain} known only after apply)` : ''}.`)
  return lines.join('\n')
}

function parameterLines(list: ParameterChange[]): string[] {
  return list.map((p) => {
    const has = (k: 'before' | 'after') => k in p
    const hidden = p.hidden ? '  (hidden)' : ''
    if (!has('before')) return `  + ${p.name}: ${show(p.after)}${hidden}`
    if (!has('after')) return `  - ${p.name}: ${show(p.before)}${hidden}`
    return `  ~ ${p.name}: ${show(p.before)} -> ${show(p.after)}${hidden}`
  })
}

/** Two versions' differences: the template and environment as unified diffs, then the parameters. */
export function renderVersionDiff(d: VersionDiff): string {
  const parts: string[] = []
  if (d.template) parts.push(d.template.trimEnd())
  if (d.environment) parts.push(d.environment.trimEnd())
  if (d.parameters.length) parts.push(['Parameters:', ...parameterLines(d.parameters)].join('\n'))
  return parts.length ? parts.join('\n\n') : `No differences between ${d.from} and ${d.to}.`
}
