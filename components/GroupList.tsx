'use client'
/**
 * The groups of a grouped graph as a list: each with its size and its
 * members' states, and a button that opens or closes it on the graph (the
 * keyboard's way to what a tap on a group does).
 */
import type { GraphModel } from '../lib/ui/graph-model'
import { summarise, type Group } from '../lib/ui/view-graph'
import { countsLine } from './graph-style'

const SHOWN = 40

export function GroupList({ model, groups, expanded, onToggle }: { model: GraphModel; groups: Group[]; expanded: ReadonlySet<string>; onToggle: (id: string) => void }) {
  if (!groups.length) return null
  return (
    <details className="group-list" open={groups.length <= 12}>
      <summary>{groups.length} groups</summary>
      <ul data-testid="group-list">
        {groups.slice(0, SHOWN).map((g) => {
          const s = summarise(model, g.members)
          const open = expanded.has(g.id)
          return (
            <li key={g.id} data-group={g.label}>
              <button type="button" aria-expanded={open} onClick={() => onToggle(g.id)} aria-label={`${open ? 'close' : 'open'} group ${g.label} (${s.total} nodes, ${s.done} done)`}>
                {open ? '▾' : '▸'} {g.label}
              </button>{' '}
              <span className="note">{s.done}/{s.total} · {countsLine(s.counts)}</span>
            </li>
          )
        })}
        {groups.length > SHOWN && <li className="note">and {groups.length - SHOWN} more (search narrows them)</li>}
      </ul>
    </details>
  )
}
