/**
 * How each node state is drawn. Colour is never the only cue: every state also
 * has its own shape, border style and an icon in the label (the legend shows
 * all three).
 */
import type { DisplayNode, NodeState } from '../lib/ui/graph-model'

export interface StateLook {
  icon: string
  color: string
  border: string
  borderStyle: 'solid' | 'dashed' | 'dotted' | 'double'
  shape: string
}

export const LOOKS: Record<NodeState, StateLook> = {
  'not-started': { icon: '○', color: '#f3f4f6', border: '#9ca3af', borderStyle: 'dashed', shape: 'round-rectangle' },
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
  skipped: { icon: '–', color: '#fafafa', border: '#a8a29e', borderStyle: 'dotted', shape: 'rectangle' },
}

export function stateText(n: DisplayNode): string {
  switch (n.state) {
    case 'waiting':
      return n.required !== null ? `waiting ${n.satisfied ?? 0} of ${n.required}` : 'waiting'
    case 'running':
      return n.progress !== null ? `running ${Math.round(n.progress * 100)}%` : 'running'
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
  return `${LOOKS[n.state].icon} ${n.name}${marks ? ' ' + marks : ''}\n${stateText(n)}`
}
