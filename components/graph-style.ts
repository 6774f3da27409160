/**
 * How each node state is drawn, in the light and the dark theme. Colour is
 * never the only cue: every state also has its own shape, border style and an
 * icon in the label (the legend shows all three).
 *
 * The Cytoscape stylesheet styles nodes by class (`s-<state>`), so a state
 * change is one class swap, and its level of detail is Cytoscape's own: a
 * label whose text would be drawn smaller than `min-zoomed-font-size` is not
 * drawn at all (the node's colour and shape still say its state, and the
 * counts bar over the graph says how many are in each).
 */
import type cytoscape from 'cytoscape'
import { DRIFT_ICON, isDrifted } from '../lib/ui/drift'
import { hookOf, type DisplayNode, type NodeState } from '../lib/ui/graph-model'

export type Theme = 'light' | 'dark'

export interface StateLook {
  icon: string
  color: string
  border: string
  borderStyle: 'solid' | 'dashed' | 'dotted' | 'double'
  shape: string
}

export const LOOKS: Record<NodeState, StateLook> = {
  'not-started': { icon: '○', color: '#f3f4f6', border: '#6b7280', borderStyle: 'dashed', shape: 'round-rectangle' },
  waiting: { icon: '◔', color: '#fef9c3', border: '#a16207', borderStyle: 'dotted', shape: 'round-rectangle' },
  ready: { icon: '◎', color: '#e0f2fe', border: '#0369a1', borderStyle: 'solid', shape: 'round-rectangle' },
  retriggered: { icon: '↻', color: '#ede9fe', border: '#6d28d9', borderStyle: 'double', shape: 'hexagon' },
  running: { icon: '▶', color: '#bfdbfe', border: '#1d4ed8', borderStyle: 'double', shape: 'round-rectangle' },
  blocked: { icon: '‖', color: '#ffedd5', border: '#c2410c', borderStyle: 'dashed', shape: 'octagon' },
  replaced: { icon: '⇄', color: '#e5e7eb', border: '#4b5563', borderStyle: 'dashed', shape: 'barrel' },
  deleting: { icon: '✂', color: '#fce7f3', border: '#be185d', borderStyle: 'double', shape: 'cut-rectangle' },
  complete: { icon: '✓', color: '#dcfce7', border: '#15803d', borderStyle: 'solid', shape: 'round-rectangle' },
  deleted: { icon: '⌫', color: '#f5f5f4', border: '#78716c', borderStyle: 'dotted', shape: 'cut-rectangle' },
  failed: { icon: '✗', color: '#fee2e2', border: '#b91c1c', borderStyle: 'solid', shape: 'diamond' },
  skipped: { icon: '–', color: '#fafafa', border: '#78716c', borderStyle: 'dotted', shape: 'rectangle' },
}

/** Dark theme fills and borders (same shapes, icons and border styles). */
const DARK: Record<NodeState, { color: string; border: string }> = {
  'not-started': { color: '#1f2937', border: '#9ca3af' },
  waiting: { color: '#3f3a12', border: '#facc15' },
  ready: { color: '#0c3a52', border: '#38bdf8' },
  retriggered: { color: '#33245a', border: '#a78bfa' },
  running: { color: '#1e3a8a', border: '#93c5fd' },
  blocked: { color: '#4a2410', border: '#fb923c' },
  replaced: { color: '#2d3340', border: '#9ca3af' },
  deleting: { color: '#4a1630', border: '#f472b6' },
  complete: { color: '#14391f', border: '#4ade80' },
  deleted: { color: '#292524', border: '#a8a29e' },
  failed: { color: '#4c1414', border: '#f87171' },
  skipped: { color: '#262626', border: '#a8a29e' },
}

/** A running node that waits without a worker (parked) shows this instead of ▶. */
export const PARKED_ICON = '◷'

export function lookOf(state: NodeState, theme: Theme): StateLook {
  return theme === 'dark' ? { ...LOOKS[state], ...DARK[state] } : LOOKS[state]
}

export function stateText(n: DisplayNode): string {
  switch (n.state) {
    case 'waiting':
      return n.required !== null ? `waiting ${n.satisfied ?? 0} of ${n.required}` : 'waiting'
    case 'running': {
      // Parked: the row is held, no worker acts on it (a signal, a timer, a provider, a hook).
      const hook = hookOf(n)
      if (hook) return `paused at the ${hook} hook`
      if (n.parkedUntil) return 'parked: waits, no worker'
      return n.progress !== null ? `running ${Math.round(n.progress * 100)}%` : 'running'
    }
    case 'blocked':
      return 'blocked by older traversal'
    case 'deleting':
      return 'cleanup: deleting'
    case 'not-started':
      return 'not started'
    default:
      return n.state
  }
}

export function nodeLabel(n: DisplayNode): string {
  const marks = [n.retriggered && n.state !== 'retriggered' ? '↻' : '', n.wasBlocked && n.state !== 'blocked' ? '‖' : ''].join('')
  const drift = driftLine(n)
  const icon = n.state === 'running' && n.parkedUntil ? PARKED_ICON : LOOKS[n.state].icon
  return `${icon} ${n.name}${marks ? ' ' + marks : ''}\n${stateText(n)}${drift ? `\n${drift}` : ''}`
}

/**
 * A drifted node's mark, apart from its traversal state: an outline around
 * the node (double for modified, dashed for gone) and a line of text with
 * its own icon. Empty when the node did not drift.
 */
export function driftLine(n: Pick<DisplayNode, 'drift'>): string {
  const d = n.drift
  if (!d || !isDrifted(d)) return ''
  if (d.state === 'DELETED') return `${DRIFT_ICON.DELETED} gone outside Kiln`
  return `${DRIFT_ICON.MODIFIED} drifted${d.changed.length ? `: ${d.changed.join(', ')}` : ''}`
}

/** The class of a node's drift mark (none: ''). */
export const driftClass = (n: Pick<DisplayNode, 'drift'>): string => (isDrifted(n.drift) ? ` d-${n.drift!.state.toLowerCase()}` : '')

/** The drift outline's colour, per theme (never the only cue: the outline's style and the label's line say it too). */
export const DRIFT_COLOR: Record<Theme, string> = { light: '#a21caf', dark: '#f0abfc' }
/** Outline styles: modified and gone differ in shape, not only in words. */
export const DRIFT_OUTLINE: Record<'MODIFIED' | 'DELETED', 'double' | 'dashed'> = { MODIFIED: 'double', DELETED: 'dashed' }

/** "✓ 412  ▶ 12  ○ 546": a group's (or the whole graph's) members by state, busiest first. */
export function countsLine(counts: Partial<Record<NodeState, number>>): string {
  const order: NodeState[] = ['failed', 'blocked', 'running', 'deleting', 'retriggered', 'ready', 'waiting', 'not-started', 'replaced', 'complete', 'deleted', 'skipped']
  return order.filter((s) => counts[s]).map((s) => `${LOOKS[s].icon} ${counts[s]}`).join('  ')
}

export const NODE_SIZE = { w: 150, h: 44 }

export function stylesheet(theme: Theme, big: boolean): cytoscape.StylesheetJson {
  const fg = theme === 'dark' ? '#e5e7eb' : '#111827'
  const line = theme === 'dark' ? '#64748b' : '#94a3b8'
  const states = (Object.keys(LOOKS) as NodeState[]).map((s) => {
    const l = lookOf(s, theme)
    return { selector: `.s-${s}`, style: { 'background-color': l.color, 'border-color': l.border, 'border-style': l.borderStyle, shape: l.shape } }
  })
  return [
    {
      selector: 'node',
      style: {
        label: 'data(label)', 'text-wrap': 'wrap', 'text-valign': 'center', 'text-halign': 'center', 'font-size': 11, color: fg,
        'font-family': 'system-ui, sans-serif', width: NODE_SIZE.w, height: NODE_SIZE.h, 'border-width': 2, 'min-zoomed-font-size': 7,
        'text-max-width': `${NODE_SIZE.w - 8}px`,
      } as never,
    },
    // `nl`: a node of a big graph zoomed out past reading (components/LiveGraph.tsx) carries no label at all, not
    // merely an undrawn one: Cytoscape still measures and looks up an undrawn label on every frame (a fifth of a
    // 1,000-node redraw). A class, not another stylesheet: setting a stylesheet parses it all again.
    { selector: 'node.nl', style: { label: '' } },
    ...states,
    // the critical path: its edges in amber, its nodes' borders thicker (their colour still says their state)
    { selector: 'node.crit', style: { 'border-width': 4 } },
    { selector: 'node.s-running, node.s-deleting', style: { 'border-width': 5 } },
    { selector: 'node.group', style: { width: 260, height: 72, 'font-size': 15, 'font-weight': 'bold', 'min-zoomed-font-size': 4, 'border-width': 3, shape: 'round-rectangle', 'text-max-width': '250px' } as never },
    {
      selector: 'node.box',
      style: {
        'background-opacity': theme === 'dark' ? 0.25 : 0.35, 'background-color': theme === 'dark' ? '#334155' : '#e2e8f0', 'border-color': line, 'border-style': 'solid', 'border-width': 1,
        shape: 'round-rectangle', 'text-valign': 'top', 'text-halign': 'center', 'font-size': 14, 'font-weight': 'bold', 'min-zoomed-font-size': 4, padding: '24px',
      } as never,
    },
    // drift: an outline outside the state's border, so both stay readable
    { selector: 'node.d-modified', style: { 'outline-width': 5, 'outline-style': DRIFT_OUTLINE.MODIFIED, 'outline-color': DRIFT_COLOR[theme], 'outline-offset': 3 } as never },
    { selector: 'node.d-deleted', style: { 'outline-width': 3, 'outline-style': DRIFT_OUTLINE.DELETED, 'outline-color': DRIFT_COLOR[theme], 'outline-offset': 3, 'background-opacity': 0.55 } as never },
    // `fc`: a node the state painter shows (components/state-painter.ts): Cytoscape keeps it (its position, its
    // classes for when it draws it again) hidden, so it builds no texture for it and draws nothing.
    { selector: 'node.fc', style: { visibility: 'hidden' } },
    { selector: 'node.dim', style: { opacity: 0.2 } },
    { selector: 'node.match', style: { 'overlay-color': '#f59e0b', 'overlay-opacity': 0.25, 'overlay-padding': 6 } },
    { selector: 'node.sel', style: { 'overlay-color': '#2563eb', 'overlay-opacity': 0.25, 'overlay-padding': 8 } },
    {
      selector: 'edge',
      style: big
        ? { width: 1, 'line-color': line, 'curve-style': 'haystack', 'haystack-radius': 0, opacity: 0.6 }
        : { width: 1.5, 'line-color': line, 'target-arrow-color': line, 'target-arrow-shape': 'triangle', 'curve-style': 'straight', 'arrow-scale': 0.8 },
    },
    // the critical path stays drawn at every zoom, other edges shown or not
    { selector: 'edge.crit', style: { width: 3.5, 'line-color': '#f59e0b', 'target-arrow-color': '#f59e0b', opacity: 1 } },
    { selector: 'edge.dim', style: { opacity: 0.1 } },
    {
      selector: 'edge.replaces',
      style: { 'line-style': 'dashed', 'line-color': theme === 'dark' ? '#cbd5e1' : '#4b5563', 'target-arrow-shape': 'chevron', 'target-arrow-color': theme === 'dark' ? '#cbd5e1' : '#4b5563', 'curve-style': 'straight', width: 2 },
    },
  ] as cytoscape.StylesheetJson
}
