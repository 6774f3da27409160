/**
 * What a worker keeps in memory per traversal: the parsed template and its
 * definition, and the indexed graph. A traversal's template and graph never
 * change, so this is computed once per traversal per worker (not once per
 * node, as Heat re-parses the template for every message).
 */
import type { PortableDefinition } from '../template/types'
import { indexGraph } from './graph'
import type { ConvergenceStore, StoredTraversal, TemplateEvaluator } from './ports'
import type { GraphIndex, NodeId } from './types'

export interface TraversalContext {
  stored: StoredTraversal
  /** null for a template that cannot be built any more (it was validated at submit time, so: a spent budget) */
  definition: PortableDefinition | null
  definitionError: string | null
  index: GraphIndex
}

/**
 * The traversal's definition, evaluated on this thread within the inline
 * allowance (in proportion to the template's size), or on an evaluation
 * thread under the full budget: a worker's event loop never runs more of a
 * tenant's template than that.
 */
export async function buildTraversalContext(stored: StoredTraversal, evaluator: Pick<TemplateEvaluator, 'definitionOf'>): Promise<TraversalContext> {
  let definition: PortableDefinition | null = null
  let definitionError: string | null = null
  try {
    // The stored JSON, not the text: reading YAML with source positions costs
    // tens of milliseconds per hundred resources, per traversal and worker, and
    // positions only matter for the submit-time errors already reported.
    // The store sends the text only where nothing parsed was stored (delete and
    // rollback-to-nothing store `{}`): it decides, this reads whichever came.
    const { source, parsed, environment, parameters } = stored.template
    definition = await evaluator.definitionOf({ source, parsed, environment, parameters, stackName: stored.stackName, stackId: stored.stackId, projectId: stored.projectId })
  } catch (err) {
    definitionError = err instanceof Error ? err.message : String(err)
  }
  return { stored, definition, definitionError, index: indexGraph(stored.graph) }
}

/** A small LRU of traversal contexts, loading through the store on a miss. */
export class TraversalCache {
  private readonly entries = new Map<string, Promise<TraversalContext | null>>()

  constructor(
    private readonly store: Pick<ConvergenceStore, 'loadTraversal'>,
    private readonly evaluator: Pick<TemplateEvaluator, 'definitionOf'>,
    private readonly capacity = 32,
  ) {}

  get(traversalId: string): Promise<TraversalContext | null> {
    const hit = this.entries.get(traversalId)
    if (hit) {
      this.entries.delete(traversalId)
      this.entries.set(traversalId, hit)
      return hit
    }
    const loading = this.store.loadTraversal(traversalId).then((t) => (t ? buildTraversalContext(t, this.evaluator) : null))
    loading.catch(() => this.entries.delete(traversalId))
    this.entries.set(traversalId, loading)
    while (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value!)
    return loading
  }
}

/** Successors of a node in cast order, and whether it is a root. */
export function nodeLinks(index: GraphIndex, id: NodeId) {
  return { successors: index.requiredBy.get(id) ?? [], isRoot: index.roots.has(id) }
}
