'use client'
/**
 * Over the graph: zoom buttons, search (by name, type or state, e.g.
 * `state:failed` or `type:TestResource`), filters, grouping, and buttons that
 * bring the blocked or failed nodes into view; under them, how many nodes
 * are in each state (what the graph's colours say when its labels are too
 * small to draw) and, after a drift check, how many drifted (with a filter
 * that shows only those).
 */
import type { GroupBy } from '../lib/ui/view-graph'

import type { Filter } from '../lib/ui/search'
export type { Filter }
export const FILTERS: Filter[] = ['blocked', 'failed', 'running', 'replaced', 'drifted']

export function GraphToolbar(p: {
  query: string
  onQuery: (q: string) => void
  filters: ReadonlySet<Filter>
  onToggleFilter: (f: Filter) => void
  groupBy: GroupBy
  onGroupBy: (g: GroupBy) => void
  matches: number | null
  counts: string
  onZoom: (how: 'in' | 'out' | 'fit' | 'actual') => void
  onFocusMatches: () => void
  focusable: { blocked: number; failed: number }
  onFocusState: (s: 'blocked' | 'failed') => void
  /** nodes the current drift check found modified or gone outside Kiln */
  drifted: { modified: number; deleted: number }
}) {
  const drifted = p.drifted.modified + p.drifted.deleted
  // The drifted filter is offered while something drifted (or while it is on, so it can be turned off).
  const filters = FILTERS.filter((f) => f !== 'drifted' || drifted > 0 || p.filters.has(f))
  return (
    <div className="graph-toolbar" role="toolbar" aria-label="graph tools">
      <div className="zoom-buttons" role="group" aria-label="zoom">
        <button type="button" className="icon" onClick={() => p.onZoom('in')} aria-label="zoom in" title="zoom in (+)">+</button>
        <button type="button" className="icon" onClick={() => p.onZoom('out')} aria-label="zoom out" title="zoom out (-)">−</button>
        <button type="button" onClick={() => p.onZoom('fit')} title="fit the graph (0)">Fit</button>
        <button type="button" onClick={() => p.onZoom('actual')} title="labels at full size">1:1</button>
      </div>
      <label className="search">
        <span className="sr-only">search nodes</span>
        <input
          type="search"
          value={p.query}
          placeholder="search: name, type:…, state:…"
          aria-label="search nodes by name, type or state"
          onChange={(e) => p.onQuery(e.target.value)}
          onKeyDown={(e) => e.key === 'Enter' && p.onFocusMatches()}
        />
      </label>
      {p.matches !== null && (
        <span className="matches" aria-live="polite">
          {p.matches} match{p.matches === 1 ? '' : 'es'}{' '}
          {p.matches > 0 && <button type="button" onClick={p.onFocusMatches}>Show them</button>}
        </span>
      )}
      <div className="filters" role="group" aria-label="show only">
        {filters.map((f) => (
          <button key={f} type="button" className={`chip${p.filters.has(f) ? ' on' : ''}`} aria-pressed={p.filters.has(f)} onClick={() => p.onToggleFilter(f)}>
            {f}
          </button>
        ))}
      </div>
      <label className="group-by">
        Group{' '}
        <select value={p.groupBy} onChange={(e) => p.onGroupBy(e.target.value as GroupBy)} aria-label="group nodes by">
          <option value="none">none</option>
          <option value="prefix">name prefix</option>
          <option value="type">type</option>
          <option value="layer">layer</option>
        </select>
      </label>
      {p.focusable.blocked > 0 && <button type="button" onClick={() => p.onFocusState('blocked')}>Focus the {p.focusable.blocked} blocked</button>}
      {p.focusable.failed > 0 && <button type="button" onClick={() => p.onFocusState('failed')}>Focus the {p.focusable.failed} failed</button>}
      <span className="counts" data-testid="state-counts" aria-label="nodes by state">{p.counts}</span>
      {drifted > 0 && (
        <span className="drift-count" data-testid="drift-count" title="found by the latest drift check; an update with converge brings them back">
          <span aria-hidden>≠</span> {drifted} drifted{p.drifted.deleted ? ` (${p.drifted.deleted} gone)` : ''}
        </span>
      )}
    </div>
  )
}
