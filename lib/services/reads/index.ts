/**
 * Read side of the service layer: stacks, resources, events, traversals,
 * graphs, templates and outputs of one project. Every query is scoped to the
 * actor's project; another project's stack is "not found". Secrets are
 * masked here, once, for every caller (API, Heat API, UI, CLI): hidden
 * parameter values, secret attributes, and every value derived from them
 * (each row stores the forms its properties carry, resource.secret_forms), by
 * value wherever they show; an output evaluated from a secret is `sensitive`
 * and shown only when asked for by name with `reveal`.
 *
 * The service is composed of small systems that share one set of resources
 * (the pool, the resource types): stacks, resource rows, drift, traversals
 * (and their graphs), outputs and events, each masking with the stack's
 * secrets (SecretSystem).
 */
import type { Db } from '../../db/client'
import { MASK } from '../../plan/secrets'
import type { Registry } from '../../resources/registry'
import type { StackRecord } from '../stacks/types'
import { DriftReadSystem } from './drift'
import { EventReadSystem } from './events'
import { OutputSystem } from './outputs'
import { ResourceRowSystem } from './resource-rows'
import { SecretSystem } from './secrets'
import type { ReadResources } from './shared'
import { StackReadSystem } from './stacks'
import { TraversalReadSystem } from './traversals'

export { MASK }
export type { StackSummary, ListQuery } from './stacks'

export function createReadService(db: Db, registry: Registry) {
  const resources: ReadResources = { pool: db.pool, registry }
  const secrets = new SecretSystem(resources)
  const outputs = new OutputSystem({ resources, secrets })
  const drift = new DriftReadSystem({ resources, secrets })
  const stacks = new StackReadSystem({ resources, secrets, outputs })
  const rows = new ResourceRowSystem({ resources, secrets, drift })
  const traversals = new TraversalReadSystem({ resources, secrets })
  const events = new EventReadSystem({ resources, secrets })
  return {
    stackRow: stacks.stackRow.bind(stacks),
    list: stacks.list.bind(stacks),
    show: stacks.show.bind(stacks),
    showSummary: stacks.showSummary.bind(stacks),
    template: stacks.template.bind(stacks),
    workers: stacks.workers.bind(stacks),
    resources: rows.resources.bind(rows),
    snapshots: rows.snapshots.bind(rows),
    drift: drift.drift.bind(drift),
    events: events.events.bind(events),
    traversals: traversals.traversals.bind(traversals),
    traversal: traversals.traversal.bind(traversals),
    traversalTemplate: traversals.traversalTemplate.bind(traversals),
    graph: traversals.graph.bind(traversals),
    outputs: outputs.outputs.bind(outputs),
    output: outputs.output.bind(outputs),
  }
}

export type ReadService = ReturnType<typeof createReadService>
export type { StackRecord }
