'use client'
/**
 * Every node of the graph as a table row: the accessible twin of the graph
 * (keyboard and screen readers) and what the browser tests read.
 */
import { memo } from 'react'
import type { DisplayNode, GraphModel } from '../lib/ui/graph-model'
import { LOOKS, stateText } from './graph-style'

export function notesOf(n: DisplayNode): string[] {
  const out: string[] = []
  if (n.wasBlocked) out.push('was blocked')
  if (n.retriggered) out.push('retriggered')
  if (n.replaces !== null) out.push(`replaces #${n.replaces}`)
  if (n.replacedBy !== null) out.push(`replaced by #${n.replacedBy}`)
  if (n.kind === 'cleanup') out.push('cleanup only')
  return out
}

/** One row; memoised on plain values, so a frame re-renders only the rows whose node changed. */
const Row = memo(function Row(p: { id: string; name: string; rowId: number; state: DisplayNode['state']; text: string; reason: string; worker: string; notes: string; selected: boolean; critical: boolean; onSelect: (id: string) => void }) {
  return (
    <div role="row" className={`rrow${p.selected ? ' selected' : ''}`} data-resource={p.name} data-row={p.rowId} data-state={p.state} aria-selected={p.selected}>
      <span role="cell">
        <button type="button" className="link" onClick={() => p.onSelect(p.id)}>{p.name}</button>
        {p.critical ? <span className="crit" title="on the critical path"> ★</span> : null}
      </span>
      <span role="cell">#{p.rowId}</span>
      <span role="cell" className="state-cell" title={p.reason}>
        <span aria-hidden>{LOOKS[p.state].icon}</span> {p.text}
      </span>
      <span role="cell">{p.worker}</span>
      <span role="cell" className="notes">{p.notes}</span>
    </div>
  )
})

export function ResourcesTable({ model, selected, onSelect, critical }: { model: GraphModel; selected: string | null; onSelect: (id: string) => void; critical: Set<string> }) {
  const nodes = [...model.nodes.values()].sort((a, b) => a.name.localeCompare(b.name, 'en', { numeric: true }) || a.rowId - b.rowId)
  return (
    <div className="table-scroll">
      <div role="table" aria-label="resources" className="rtable" data-testid="resources-table">
        <div role="rowgroup">
          <div role="row" className="rrow rhead">
            <span role="columnheader">Resource</span>
            <span role="columnheader">Row</span>
            <span role="columnheader">State</span>
            <span role="columnheader">Worker</span>
            <span role="columnheader">Notes</span>
          </div>
        </div>
        <div role="rowgroup">
          {nodes.map((n) => (
            <Row key={n.id} id={n.id} name={n.name} rowId={n.rowId} state={n.state} text={stateText(n)} reason={n.reason} worker={n.worker ?? ''}
              notes={notesOf(n).join(', ')} selected={selected === n.id} critical={critical.has(n.id)} onSelect={onSelect} />
          ))}
        </div>
      </div>
    </div>
  )
}
