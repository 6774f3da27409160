'use client'
/**
 * Every node of the graph as a table row: the accessible twin of the graph
 * (keyboard and screen readers) and what the browser tests read. Virtualised
 * with TanStack Virtual: only the rows in view (and a few around them) are in
 * the DOM, so 10,000 rows cost what 30 do; `aria-rowcount` and
 * `aria-rowindex` tell assistive technology the whole table's size.
 */
import { useVirtualizer } from '@tanstack/react-virtual'
import { memo, useEffect, useMemo, useRef } from 'react'
import { DRIFT_ICON, isDrifted } from '../lib/ui/drift'
import type { DisplayNode, GraphModel } from '../lib/ui/graph-model'
import { workerName, type WorkerNames } from '../lib/ui/event-text'
import { driftLine, LOOKS, stateText } from './graph-style'

export function notesOf(n: DisplayNode): string[] {
  const out: string[] = []
  if (n.parkedUntil) out.push(`parked (no worker) until ${new Date(n.parkedUntil).toLocaleTimeString()}`)
  if (n.wasBlocked) out.push('was blocked')
  if (n.retriggered) out.push('retriggered')
  if (n.replaces !== null) out.push(`replaces #${n.replaces}`)
  if (n.replacedBy !== null) out.push(`replaced by #${n.replacedBy}`)
  if (n.kind === 'cleanup') out.push('cleanup only')
  return out
}

const ROW_HEIGHT = 30
/** r2 before r10; one collator for every comparison (localeCompare builds one per call: seconds for 10,000 rows). */
const BY_NAME = new Intl.Collator('en', { numeric: true })

interface RowProps {
  id: string
  index: number
  name: string
  type: string
  rowId: number
  state: DisplayNode['state']
  text: string
  reason: string
  worker: string
  notes: string
  selected: boolean
  critical: boolean
  /** MODIFIED or DELETED when the current drift check found the row so; '' otherwise */
  drift: string
  driftText: string
  top: number
  onSelect: (id: string, opener: HTMLElement) => void
}

/** One row; memoised on plain values, so a frame re-renders only the rows whose node changed. */
const Row = memo(function Row(p: RowProps) {
  return (
    <div
      role="row"
      aria-rowindex={p.index + 2}
      className={`rrow${p.selected ? ' selected' : ''}`}
      data-resource={p.name}
      data-row={p.rowId}
      data-state={p.state}
      data-drift={p.drift || undefined}
      aria-selected={p.selected}
      style={{ transform: `translateY(${p.top}px)` }}
    >
      <span role="cell" className="c-name">
        <button type="button" className="link" onClick={(e) => p.onSelect(p.id, e.currentTarget)} aria-label={`inspect ${p.name} (row ${p.rowId})`}>
          {p.name}
        </button>
        {p.critical ? <span className="crit" title="on the critical path"> ★</span> : null}
      </span>
      <span role="cell" className="c-row">#{p.rowId}</span>
      <span role="cell" className="c-state state-cell" title={p.reason}>
        <span aria-hidden>{LOOKS[p.state].icon}</span> {p.text}
        {p.drift ? <DriftBadge state={p.drift as 'MODIFIED' | 'DELETED'} title={p.driftText} /> : null}
      </span>
      <span role="cell" className="c-type">{p.type}</span>
      <span role="cell" className="c-worker">{p.worker}</span>
      <span role="cell" className="c-notes notes">{p.notes}</span>
    </div>
  )
})

/** A drifted row's mark beside its state: an icon and a word in a dashed box, its own look (not a state's). */
export function DriftBadge({ state, title }: { state: 'MODIFIED' | 'DELETED'; title: string }) {
  return (
    <span className={`drift-badge drift-${state.toLowerCase()}`} title={title} data-testid="drift-badge">
      <span aria-hidden>{DRIFT_ICON[state]}</span> {state === 'MODIFIED' ? 'drifted' : 'gone'}
    </span>
  )
}

export function ResourcesTable(p: {
  model: GraphModel
  version: number
  /** rows shown (search and filters); null: all */
  only: ReadonlySet<string> | null
  selected: string | null
  onSelect: (id: string, opener: HTMLElement) => void
  critical: ReadonlySet<string>
  workers: WorkerNames
  describe: (n: DisplayNode) => string
}) {
  const scroller = useRef<HTMLDivElement>(null)
  const size = p.model.nodes.size
  // Sorted once per set of nodes (a replacement adds one), not per event.
  const sorted = useMemo(
    () => [...p.model.nodes.values()].sort((a, b) => BY_NAME.compare(a.name, b.name) || a.rowId - b.rowId).map((n) => n.id),
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [p.model, size],
  )
  const ids = useMemo(() => (p.only ? sorted.filter((id) => p.only!.has(id)) : sorted), [sorted, p.only])
  const v = useVirtualizer({ count: ids.length, getScrollElement: () => scroller.current, estimateSize: () => ROW_HEIGHT, overscan: 12 })

  // A node selected elsewhere (the graph, a deep link) is scrolled into view.
  useEffect(() => {
    if (!p.selected) return
    const i = ids.indexOf(p.selected)
    if (i >= 0) v.scrollToIndex(i, { align: 'auto' })
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [p.selected])

  return (
    <div className="table-scroll" ref={scroller} tabIndex={0} aria-label="resources table (scrollable)">
      <div role="table" aria-label="resources" aria-rowcount={ids.length + 1} className="rtable" data-testid="resources-table">
        <div role="rowgroup" className="rhead-group">
          <div role="row" aria-rowindex={1} className="rrow rhead">
            <span role="columnheader" className="c-name">Resource</span>
            <span role="columnheader" className="c-row">Row</span>
            <span role="columnheader" className="c-state">State</span>
            <span role="columnheader" className="c-type">Type</span>
            <span role="columnheader" className="c-worker">Worker</span>
            <span role="columnheader" className="c-notes">Notes</span>
          </div>
        </div>
        <div role="rowgroup" className="rbody" style={{ height: v.getTotalSize() }}>
          {v.getVirtualItems().map((item) => {
            const n = p.model.nodes.get(ids[item.index]!)!
            return (
              <Row key={n.id} id={n.id} index={item.index} top={item.start} name={n.name} type={n.type} rowId={n.rowId} state={n.state} text={stateText(n)}
                reason={p.describe(n)} worker={workerName(n.worker ?? n.lastWorker, p.workers)} notes={notesOf(n).join(', ')}
                selected={p.selected === n.id} critical={p.critical.has(n.id)} onSelect={p.onSelect}
                drift={isDrifted(n.drift) ? n.drift!.state : ''} driftText={driftLine(n)} />
            )
          })}
        </div>
      </div>
      {ids.length === 0 && <p className="empty">No resource matches.</p>}
    </div>
  )
}
