'use client'
/**
 * The traversal drawn with Cytoscape. The layout (top to bottom, dependencies
 * above their dependents: dagre for small graphs, lib/ui/layout's layered
 * layout for big ones) is computed once per traversal; live
 * events only restyle the nodes that changed, inside one batch. A replacement
 * that appears mid-traversal is placed beside the row it replaces.
 */
import cytoscape, { type Core, type ElementDefinition } from 'cytoscape'
import dagre from 'cytoscape-dagre'
import { useEffect, useRef } from 'react'
import type { DisplayNode, GraphModel } from '../lib/ui/graph-model'
import { LARGE_GRAPH, layeredLayout } from '../lib/ui/layout'
import { LOOKS, nodeLabel } from './graph-style'
import { reportShown } from './perf-probe'

let registered = false
function register() {
  if (registered) return
  cytoscape.use(dagre)
  registered = true
}

function nodeData(n: DisplayNode, critical: Set<string>) {
  const look = LOOKS[n.state]
  return {
    id: n.id, label: nodeLabel(n), state: n.state, reason: n.reason, color: look.color, border: look.border, borderStyle: look.borderStyle, shape: look.shape,
    critical: critical.has(n.id) ? 1 : 0, width: n.state === 'running' || n.state === 'deleting' ? 5 : critical.has(n.id) ? 4 : 2,
  }
}

/** What decides how a node is drawn: a node is restyled only when this changes. */
const lookKey = (d: ReturnType<typeof nodeData>) => `${d.label}|${d.state}|${d.critical}`

const STYLE: cytoscape.StylesheetJson = [
  {
    selector: 'node',
    style: {
      label: 'data(label)', 'text-wrap': 'wrap', 'text-valign': 'center', 'text-halign': 'center', 'font-size': 11,
      'font-family': 'system-ui, sans-serif', width: 150, height: 44, shape: 'data(shape)' as never,
      'background-color': 'data(color)', 'border-color': 'data(border)', 'border-width': 'data(width)' as never, 'border-style': 'data(borderStyle)' as never,
    },
  },
  { selector: 'node:selected', style: { 'overlay-color': '#2563eb', 'overlay-opacity': 0.15, 'overlay-padding': 6 } },
  { selector: 'edge', style: { width: 1.5, 'line-color': '#94a3b8', 'target-arrow-color': '#94a3b8', 'target-arrow-shape': 'triangle', 'curve-style': 'bezier' } },
  { selector: 'edge[critical = 1]', style: { width: 3.5, 'line-color': '#f59e0b', 'target-arrow-color': '#f59e0b' } },
  { selector: 'edge[kind = "replaces"]', style: { 'line-style': 'dashed', 'line-color': '#4b5563', 'target-arrow-shape': 'chevron', label: 'replaced by', 'font-size': 9 } },
]

export function LiveGraph({ model, version, rebuiltAt, critical, selected, onSelect }: {
  model: GraphModel | null
  version: number
  rebuiltAt: number
  critical: string[]
  selected: string | null
  onSelect: (id: string | null) => void
}) {
  const host = useRef<HTMLDivElement>(null)
  const cy = useRef<Core | null>(null)
  /** per node, the look last drawn */
  const drawnRef = useRef(new Map<string, string>())
  const onSelectRef = useRef(onSelect)
  onSelectRef.current = onSelect
  const criticalSet = new Set(critical)
  const critEdges = new Set(critical.slice(1).map((id, i) => `${critical[i]}->${id}`))

  useEffect(() => {
    register()
    if (!host.current) return
    const c = cytoscape({ container: host.current, style: STYLE, minZoom: 0.05, maxZoom: 3, wheelSensitivity: 0.3 })
    c.on('tap', 'node', (e) => onSelectRef.current(e.target.id()))
    c.on('tap', (e) => e.target === c && onSelectRef.current(null))
    // Hover shows the node's state and reason (a failure's reason, a block's holder) as a tooltip.
    c.on('mouseover', 'node', (e) => host.current?.setAttribute('title', `${e.target.data('label').replace('\n', ': ')}${e.target.data('reason') ? ` — ${e.target.data('reason')}` : ''}`))
    c.on('mouseout', 'node', () => host.current?.removeAttribute('title'))
    cy.current = c
    return () => c.destroy()
  }, [])

  // A new traversal: new elements, one layout.
  useEffect(() => {
    const c = cy.current
    if (!c) return
    c.elements().remove()
    drawnRef.current.clear()
    if (!model) return
    const nodes = [...model.nodes.values()].map((n) => nodeData(n, criticalSet))
    const els: ElementDefinition[] = [
      ...nodes.map((data) => ({ group: 'nodes' as const, data })),
      ...model.edges.map((e) => ({ group: 'edges' as const, data: { id: e.id, source: e.source, target: e.target, kind: e.kind, critical: critEdges.has(e.id) ? 1 : 0 } })),
    ]
    c.add(els)
    for (const d of nodes) drawnRef.current.set(d.id, lookKey(d))
    const started = performance.now()
    if (model.nodes.size <= LARGE_GRAPH) c.layout({ name: 'dagre', rankDir: 'TB', nodeSep: 20, rankSep: 50, animate: false } as never).run()
    else {
      const at = layeredLayout([...model.nodes.keys()], model.edges.filter((e) => e.kind === 'depends'))
      c.layout({ name: 'preset', positions: (n: { id(): string }) => at.get(n.id()) ?? { x: 0, y: 0 }, animate: false } as never).run()
    }
    c.fit(undefined, 20)
    if (c.zoom() > 1) {
      // a small graph is shown at natural size, not blown up to fill the panel
      c.zoom(1)
      c.center()
    }
    host.current?.setAttribute('data-layout-ms', String(Math.round(performance.now() - started)))
    host.current?.setAttribute('data-traversal', model.traversalId)
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [rebuiltAt])

  // Live changes: restyle the nodes whose look changed (compared with what was drawn, so a
  // render that coalesced several event batches misses nothing); place new replacement
  // nodes beside the row they replace.
  useEffect(() => {
    const c = cy.current
    if (!c || !model) return
    const drawn = drawnRef.current
    c.batch(() => {
      for (const n of model.nodes.values()) {
        const data = nodeData(n, criticalSet)
        const key = lookKey(data)
        if (drawn.get(n.id) === key) continue
        drawn.set(n.id, key)
        const el = c.getElementById(n.id)
        if (el.nonempty()) el.data(data)
        else {
          const old = n.replaces !== null ? c.getElementById(`r${n.replaces}`) : null
          const pos = old && old.nonempty() ? { x: old.position('x') + 170, y: old.position('y') + 14 } : { x: 0, y: 0 }
          c.add({ group: 'nodes', data, position: pos })
        }
      }
      for (const e of model.edges) {
        if (c.getElementById(e.id).empty() && c.getElementById(e.source).nonempty() && c.getElementById(e.target).nonempty())
          c.add({ group: 'edges', data: { id: e.id, source: e.source, target: e.target, kind: e.kind, critical: 0 } })
      }
      c.edges().forEach((e) => {
        const v = critEdges.has(e.id()) ? 1 : 0
        if (e.data('critical') !== v) e.data('critical', v)
      })
    })
    // What is drawn, per state (read by the browser tests to compare the graph with the table).
    const counts: Record<string, number> = {}
    c.nodes().forEach((el) => void (counts[el.data('state')] = (counts[el.data('state')] ?? 0) + 1))
    host.current?.setAttribute('data-drawn', JSON.stringify(counts))
    reportShown(model.lastSeq)
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [version, rebuiltAt, critical.join(',')])

  useEffect(() => {
    const c = cy.current
    if (!c) return
    c.nodes(':selected').unselect()
    if (selected) c.getElementById(selected).select()
  }, [selected, version])

  return (
    <div className="graph-wrap">
      <div ref={host} className="graph" data-testid="graph" role="img" aria-label="traversal graph (the same states are listed in the resources table)" />
      <div className="graph-tools">
        <button type="button" onClick={() => cy.current?.fit(undefined, 20)}>Fit</button>
      </div>
    </div>
  )
}
