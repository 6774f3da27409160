/**
 * Core vocabulary of the convergence engine (pure: no I/O).
 *
 * A traversal's graph has two kinds of node per resource row (Heat's
 * ConvergenceNode): the *update* node (create or update the row to the
 * traversal's template) and the *cleanup* node (delete the row if it is not at
 * the traversal's template). An edge `from -> to` means "from waits for to"
 * (`to` runs first), as in Heat's `Dependencies`.
 */

export type StackAction = 'CREATE' | 'UPDATE' | 'DELETE' | 'ROLLBACK' | 'CHECK' | 'DRIFT'
export type StackStatus = 'IN_PROGRESS' | 'COMPLETE' | 'FAILED'
export type ResourceAction = 'INIT' | 'CREATE' | 'UPDATE' | 'DELETE' | 'ROLLBACK' | 'CHECK'
export type ResourceStatus = 'IN_PROGRESS' | 'COMPLETE' | 'FAILED'
export type NodeState = 'WAITING' | 'READY' | 'RUNNING' | 'BLOCKED' | 'DONE' | 'FAILED' | 'SKIPPED'

/** A graph node: resource row id and direction. */
export interface NodeKey {
  rid: number
  update: boolean
}

/** `"12:u"` / `"12:c"` — the string form used as a map key and in stored graphs. */
export type NodeId = string

export function nodeId(k: NodeKey): NodeId {
  return `${k.rid}:${k.update ? 'u' : 'c'}`
}

export function parseNodeId(id: NodeId): NodeKey {
  const [rid, dir] = id.split(':')
  return { rid: Number(rid), update: dir === 'u' }
}

/** What the graph builder needs to know about an existing resource row. */
export interface ExistingRow {
  id: number
  name: string
  action: ResourceAction
  status: ResourceStatus
  currentTemplateId: string | null
  requires: number[]
  replaces: number | null
  replacedBy: number | null
  /** ms since epoch of the last update request (or creation) — tie-breaker of the best-row choice */
  updatedAt: number
}

export interface GraphNode {
  id: NodeId
  rid: number
  update: boolean
  /** resource name of the row (for display and for the update node's template definition) */
  name: string
}

/** A traversal graph, computed once at traversal start and stored. */
export interface TraversalGraph {
  nodes: GraphNode[]
  /** [from, to]: `from` waits for `to`. */
  edges: [NodeId, NodeId][]
}

/** Derived, in-memory indexes of a TraversalGraph. */
export interface GraphIndex {
  graph: TraversalGraph
  byId: Map<NodeId, GraphNode>
  /** predecessors: what a node waits for */
  requires: Map<NodeId, NodeId[]>
  /** successors: who waits for a node, cleanup successors first (Heat bug 1713900) */
  requiredBy: Map<NodeId, NodeId[]>
  /** nodes that wait for nothing, cleanup first: dispatched at traversal start */
  leaves: NodeId[]
  /** nodes nothing waits for: when all have finished the traversal is complete */
  roots: Set<NodeId>
}

/** What a finished node tells its successors (Heat's NodeData). */
export interface NodePayload {
  /** id of the row that did the work (a replacement's own id) */
  id: number
  uuid: string
  name: string
  /** reference id: what get_resource returns */
  physicalId: string | null
  attributes: Record<string, unknown>
  action: ResourceAction
  status: ResourceStatus
  /** The secret forms the row's properties carry (an attribute that passes one on is secret too). */
  secretForms?: string[]
}

/** What a traversal is started from, read off the checked template. */
export interface TraversalPlan {
  /** Resource names of the target template, in the order new rows are inserted. */
  names: string[]
  types: Record<string, string>
  dependsOn: Record<string, string[]>
  /** Resources with external_id (adopted, never created): the checks an update makes before it starts. */
  external?: Record<string, ExternalPlan>
  /** definitionFingerprint per resource, when asked for (a preempting update compares two templates). */
  fingerprints?: Record<string, string>
}

export interface ExternalPlan {
  externalId: string
  /** definitionFingerprint (lib/engine/adoption.ts) of the resource's definition. */
  fingerprint: string
  /** The properties whose values are known when the template is checked (an import preview compares them). */
  known: Record<string, unknown>
  /** The properties whose values wait for another resource (not compared). */
  deferred: string[]
}
