/**
 * `kiln stack drift`: a drift check's findings printed the way Terraform
 * prints changes made outside it: per drifted resource a header, then
 * `~ name = "stored" -> "seen"` per changed property, `-` for a resource that
 * is gone, `!` for a problem beyond the properties; then a summary line.
 */

export interface DriftReport {
  stackName: string
  traversalId: string
  status: string
  statusReason: string
  startedAt: string
  current: boolean
  summary: { inSync: number; modified: number; deleted: number; notChecked: number }
  resources: {
    name: string
    type: string | null
    state: 'IN_SYNC' | 'MODIFIED' | 'DELETED' | 'NOT_CHECKED'
    changes: { property: string; stored: unknown; seen: unknown }[]
    problems: string[]
  }[]
}

const value = (v: unknown) => (v === null || v === undefined ? 'null' : JSON.stringify(v))

function block(r: DriftReport['resources'][number]): string[] {
  const type = r.type ? ` (${r.type})` : ''
  switch (r.state) {
    case 'MODIFIED': {
      const width = Math.max(0, ...r.changes.map((c) => c.property.length))
      return [
        `  # ${r.name}${type} has changed outside Kiln`,
        `  ~ resource "${r.name}" {`,
        ...r.changes.map((c) => `      ~ ${c.property.padEnd(width)} = ${value(c.stored)} -> ${value(c.seen)}`),
        ...r.problems.map((p) => `      ! ${p}`),
        '    }',
      ]
    }
    case 'DELETED':
      return [`  # ${r.name}${type} has been deleted outside Kiln`, `  - resource "${r.name}" {}`]
    case 'NOT_CHECKED':
      return [`  # ${r.name}${type} could not be checked`, ...r.problems.map((p) => `  ? ${p}`)]
    case 'IN_SYNC':
      return []
  }
}

export function renderDrift(d: DriftReport): string {
  const when = `drift check ${d.traversalId.slice(0, 8)} of ${d.startedAt}`
  const notes = [
    ...(d.status === 'IN_PROGRESS' ? ['The drift check is still running: what follows is what it found so far.'] : []),
    ...(d.status !== 'IN_PROGRESS' && d.status !== 'COMPLETE' ? [`The drift check ended ${d.status}: ${d.statusReason}`] : []),
    ...(d.current ? [] : ['An operation started after this drift check: its findings may no longer hold.']),
  ]
  const total = d.resources.length
  const drifted = d.summary.modified + d.summary.deleted
  const shown = d.resources.filter((r) => r.state !== 'IN_SYNC').flatMap((r) => [...block(r), ''])
  const counts = [`${d.summary.modified} modified`, `${d.summary.deleted} deleted`, `${d.summary.inSync} in sync`, ...(d.summary.notChecked ? [`${d.summary.notChecked} not checked`] : [])].join(', ')
  const head = drifted
    ? [`Kiln found changes made outside Kiln to stack ${d.stackName} (${when}):`, '']
    : [`No drift: the objects of stack ${d.stackName} match what Kiln stored (${when}).`, ...(shown.length ? [''] : [])]
  return [...notes, ...head, ...shown, `${drifted} of ${total} resource${total === 1 ? '' : 's'} drifted: ${counts}.`].join('\n')
}
