/**
 * A traversal graph in three formats: Cytoscape elements (JSON), Graphviz
 * DOT and GraphML. Node ids are `<row id>:u` (update) and `<row id>:c`
 * (cleanup); an edge `source -> target` means "target runs first"
 * (source waits for target), as stored. `state` (optional) colours nodes.
 */
import type { NodeId, TraversalGraph } from './types'

export interface NodeAnnotation {
  state?: string
  label?: string
  /** inputs reported / inputs required (the node's sync point) */
  satisfied?: number
  required?: number
}

export interface CytoscapeElements {
  nodes: { data: { id: NodeId; rid: number; kind: 'update' | 'cleanup'; name: string; label: string; state?: string; satisfied?: number; required?: number } }[]
  edges: { data: { id: string; source: NodeId; target: NodeId } }[]
}

const label = (n: { name: string; rid: number; update: boolean }) => `${n.name}#${n.rid}${n.update ? '' : ' (cleanup)'}`

export function toCytoscape(g: TraversalGraph, notes: Record<NodeId, NodeAnnotation> = {}): CytoscapeElements {
  return {
    nodes: g.nodes.map((n) => ({
      data: { id: n.id, rid: n.rid, kind: n.update ? 'update' : 'cleanup', name: n.name, label: notes[n.id]?.label ?? label(n), ...(notes[n.id]?.state ? { state: notes[n.id]!.state } : {}),
        ...(notes[n.id]?.required !== undefined ? { satisfied: notes[n.id]!.satisfied, required: notes[n.id]!.required } : {}) },
    })),
    edges: g.edges.map(([from, to]) => ({ data: { id: `${from}->${to}`, source: from, target: to } })),
  }
}

function dotString(s: string): string {
  return `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`
}

export function toDot(g: TraversalGraph, notes: Record<NodeId, NodeAnnotation> = {}, name = 'traversal'): string {
  const lines = [`digraph ${dotString(name)} {`, '  rankdir=BT;', '  node [shape=box, fontname="Helvetica"];']
  for (const n of g.nodes) {
    const attrs = [`label=${dotString(notes[n.id]?.label ?? label(n))}`]
    if (!n.update) attrs.push('style=dashed')
    if (notes[n.id]?.state) attrs.push(`tooltip=${dotString(notes[n.id]!.state!)}`)
    lines.push(`  ${dotString(n.id)} [${attrs.join(', ')}];`)
  }
  for (const [from, to] of g.edges) lines.push(`  ${dotString(from)} -> ${dotString(to)};`)
  lines.push('}')
  return lines.join('\n') + '\n'
}

function xml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')
}

export function toGraphML(g: TraversalGraph, notes: Record<NodeId, NodeAnnotation> = {}): string {
  const out = [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">',
    '  <key id="name" for="node" attr.name="name" attr.type="string"/>',
    '  <key id="rid" for="node" attr.name="rid" attr.type="int"/>',
    '  <key id="kind" for="node" attr.name="kind" attr.type="string"/>',
    '  <key id="state" for="node" attr.name="state" attr.type="string"/>',
    '  <graph id="traversal" edgedefault="directed">',
  ]
  for (const n of g.nodes) {
    out.push(`    <node id="${xml(n.id)}">`)
    out.push(`      <data key="name">${xml(n.name)}</data>`)
    out.push(`      <data key="rid">${n.rid}</data>`)
    out.push(`      <data key="kind">${n.update ? 'update' : 'cleanup'}</data>`)
    if (notes[n.id]?.state) out.push(`      <data key="state">${xml(notes[n.id]!.state!)}</data>`)
    out.push('    </node>')
  }
  g.edges.forEach(([from, to], i) => out.push(`    <edge id="e${i}" source="${xml(from)}" target="${xml(to)}"/>`))
  out.push('  </graph>', '</graphml>')
  return out.join('\n') + '\n'
}
