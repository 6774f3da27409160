/**
 * A stack's traversals: the list, one with what the live view needs beside
 * it, the template it ran with, and its graph with each node's sync point
 * state, exported as JSON (Cytoscape), DOT or GraphML.
 */
import { resourceIdsByType } from '../../db/queries/resources'
import { listTraversals, syncPointStates, traversalForRead, traversalGraph, traversalTemplateId } from '../../db/queries/traversal-reads'
import { toCytoscape, toDot, toGraphML, type NodeAnnotation } from '../../engine/export'
import type { NodeId, TraversalGraph } from '../../engine/types'
import { NotFoundError } from '../../plan/errors'
import { redact, type Secrets } from '../../plan/secrets'
import type { Actor } from '../stacks/types'
import { maskedParameters, maskEnvironment } from './masking'
import type { SecretSystem } from './secrets'
import { iso, stackRow, templateOf, type ReadResources } from './shared'

export type GraphFormat = 'json' | 'dot' | 'graphml'

/** A traversal row as shown. */
function traversalOf(r: Record<string, unknown>, s: Record<string, unknown>, secrets: Secrets) {
  return {
    id: String(r.id),
    action: String(r.action),
    templateId: String(r.raw_template_id),
    startedBy: String(r.started_by),
    startedAt: iso(r.started_at)!,
    deadline: iso(r.deadline)!,
    endedAt: iso(r.ended_at),
    outcome: (r.outcome as string | null) ?? null,
    outcomeReason: redact(String(r.outcome_reason), secrets),
    supersededBy: (r.superseded_by_id as string | null) ?? null,
    failureReason: redact((r.failure_reason as string | null) ?? null, secrets),
    nodeCount: Number(r.node_count),
    current: r.id === s.current_traversal_id,
  }
}

export class TraversalReadSystem {
  constructor(private readonly options: { resources: ReadResources; secrets: SecretSystem }) {}

  async traversals(actor: Actor, ref: string) {
    const { resources, secrets } = this.options
    const s = await stackRow(resources, actor, ref)
    const rows = await listTraversals(resources.pool, String(s.id))
    const known = await secrets.of(s.id)
    return rows.map((r) => traversalOf(r, s, known))
  }

  /**
   * One traversal (its id, or `current`: the stack's, else its latest) and the
   * resource type of every row of the stack by type, which the stored graph
   * does not carry: what the live view and the history need beside the graph
   * and the events.
   */
  async traversal(actor: Actor, ref: string, traversalId: string | 'current') {
    const { resources, secrets } = this.options
    const s = await stackRow(resources, actor, ref)
    const r = await traversalForRead(resources.pool, String(s.id), traversalId === 'current' ? { current: (s.current_traversal_id as string | null) ?? null } : { id: traversalId })
    if (!r) throw new NotFoundError(`traversal ${traversalId} not found`)
    const known = await secrets.of(s.id)
    const types = await resourceIdsByType(resources.pool, String(s.id))
    return { ...traversalOf(r, s, known), stackLastSeq: Number(s.last_seq), types }
  }

  /** The template a traversal ran with: its text as written, environment and parameters (hidden ones masked). */
  async traversalTemplate(actor: Actor, ref: string, traversalId: string) {
    const { resources, secrets } = this.options
    const s = await stackRow(resources, actor, ref)
    const templateId = await traversalTemplateId(resources.pool, String(s.id), traversalId)
    if (!templateId) throw new NotFoundError(`traversal ${traversalId} not found`)
    const t = await templateOf(resources, templateId)
    if (!t) throw new NotFoundError('the traversal has no template')
    return { source: String(t.source), environment: maskEnvironment(t, await secrets.of(s.id)), parameters: maskedParameters(t) }
  }

  async graph(actor: Actor, ref: string, traversalId: string | 'current', format: GraphFormat) {
    const { pool } = this.options.resources
    const s = await stackRow(this.options.resources, actor, ref)
    const id = traversalId === 'current' ? s.current_traversal_id : traversalId
    if (!id || !/^[0-9a-f-]{36}$/i.test(String(id))) throw new NotFoundError('traversal not found')
    const found = await traversalGraph(pool, String(s.id), String(id))
    if (!found) throw new NotFoundError(`traversal ${id} not found`)
    const graph = found.graph as TraversalGraph
    const sp = await syncPointStates(pool, String(id))
    const notes: Record<NodeId, NodeAnnotation> = {}
    for (const r of sp) notes[`${r.resource_id}:${r.is_update ? 'u' : 'c'}` as NodeId] = { state: String(r.state).toLowerCase(), satisfied: Number(r.satisfied), required: Number(r.required) }
    const name = `${s.name}-${String(found.action).toLowerCase()}-${String(id).slice(0, 8)}`
    if (format === 'dot') return { contentType: 'text/vnd.graphviz; charset=utf-8', body: toDot(graph, notes, name), filename: `${name}.dot` }
    if (format === 'graphml') return { contentType: 'application/graphml+xml; charset=utf-8', body: toGraphML(graph, notes), filename: `${name}.graphml` }
    return { contentType: 'application/json', body: JSON.stringify({ traversalId: id, action: found.action, outcome: found.outcome, elements: toCytoscape(graph, notes) }), filename: `${name}.json` }
  }
}
