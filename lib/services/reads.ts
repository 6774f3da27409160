/**
 * Read side of the service layer: stacks, resources, events, traversals,
 * graphs, templates and outputs of one project. Every query is scoped to the
 * actor's project; another project's stack is "not found". Secrets are
 * masked here, once, for every caller (API, Heat API, UI, CLI): hidden
 * parameter values, secret attributes, and every value derived from them
 * (each row stores the forms its properties carry, resource.secret_forms), by
 * value wherever they show; an output evaluated from a secret is `sensitive`
 * and shown only when asked for by name with `reveal`.
 */
import { toCytoscape, toDot, toGraphML, type NodeAnnotation } from '../engine/export'
import type { NodeId, TraversalGraph } from '../engine/types'
import type { Registry } from '../resources/registry'
import { shownValue } from '../resources/schema'
import { addSecretValues, secretsOfType } from '../resources/secrets'
import { definitionOf, outputsOf } from '../evaluation/bounded'
import type { ResolvedOutput } from '../template'
import { BudgetExceeded } from '../template/budget'
import type { OutputSnippet } from '../template/types'
import { NotFoundError, ValidationError } from '../plan/errors'
import type { Db } from '../db/client'
import { latestDrift, type StoredDrift } from '../db/queries/drift'
import { eventsPage } from '../db/queries/events'
import { listSnapshots } from '../db/queries/outside-objects'
import { listResources, outputSourceRows, resourceIdsByType, secretHoldingRows } from '../db/queries/resources'
import { listStacks, stackForRead, stackProgress } from '../db/queries/stacks'
import { hiddenParameterTemplates, templateById, templateHeading, templateResources, templateVersionKey } from '../db/queries/templates'
import { listTraversals, syncPointStates, traversalForRead, traversalGraph, traversalTemplateId } from '../db/queries/traversal-reads'
import { workersByIds } from '../db/queries/workers'
import type { DriftState } from '../engine/drift'
import { NIL_UUID } from '../ids'
import { hiddenValues as hiddenForms, holdsSecret, MASK, redact, secretList, type Secrets } from '../plan/secrets'
import type { Actor, StackRecord } from './stacks'

export { MASK }

export interface StackSummary {
  id: string
  name: string
  action: string
  status: string
  statusReason: string
  createdAt: string
  updatedAt: string | null
  currentTraversalId: string | null
  tags: string[]
  progress: { total: number; done: number; running: number; blocked: number; failed: number } | null
}

export interface ListQuery {
  status?: string
  name?: string
  limit: number
  /** Opaque cursor: the last (created_at, id) seen. */
  marker?: string
  includeProgress?: boolean
}

const iso = (d: unknown) => (d ? new Date(d as string).toISOString() : null)

/** Who holds a row's lock: a worker (with its lease), or a parked node (no worker: held while its action waits). */
function lockOf(r: Record<string, unknown>) {
  if (!r.engine_id) return null
  const parked = r.engine_id === NIL_UUID
  return {
    worker: parked ? null : String(r.engine_id),
    workerName: (r.worker_name as string | null) ?? null,
    traversalId: (r.lock_traversal_id as string | null) ?? null,
    leaseExpiresAt: iso(r.lease_expires_at),
    parked,
  }
}

/** A row's drift as the resource listing shows it (null: no current finding). */
function rowDrift(d: { state: DriftState; changes: unknown[]; problems: string[]; observedAt: string } | undefined, traversalId: string | undefined) {
  return d && traversalId ? { state: d.state, changes: d.changes, problems: d.problems, observedAt: d.observedAt, traversalId } : null
}

function summary(r: Record<string, unknown>): StackSummary {
  return {
    id: String(r.id),
    name: String(r.name),
    action: String(r.action),
    status: String(r.status),
    statusReason: String(r.status_reason),
    createdAt: iso(r.created_at)!,
    updatedAt: iso(r.updated_at),
    currentTraversalId: (r.current_traversal_id as string | null) ?? null,
    tags: (r.tags as string[]) ?? [],
    progress: r.total === undefined || r.total === null ? null : { total: Number(r.total), done: Number(r.done), running: Number(r.running), blocked: Number(r.blocked), failed: Number(r.failed) },
  }
}

/** Static outputs kept per template (a template row never changes), least recently used first. */
const OUTPUTS_CACHE_SIZE = 256

export function createReadService(db: Db, registry: Registry) {
  const { pool } = db
  /** Types that declare a secret attribute or property: their rows' values are secrets of the stack. */
  const secretTypes = registry.list().filter((t) => secretsOfType(t).attributes.length || secretsOfType(t).properties.length).map((t) => t.name)
  const propertySecretTypes = registry.list().filter((t) => secretsOfType(t).properties.length).map((t) => t.name)
  /** Hidden values per stack (see hiddenSecrets), least recently computed first. */
  const secretsCache = new Map<string, { key: string; secrets: Secrets }>()
  /**
   * A template's outputs with parameters and conditions applied (what is left: references to
   * resources), by template id. Reads evaluate them once per template, not on every GET, and
   * evaluate nothing of the resources.
   */
  const outputsCache = new Map<string, Promise<Record<string, OutputSnippet>>>()

  function staticOutputs(t: Record<string, unknown>, stack: Record<string, unknown>): Promise<Record<string, OutputSnippet>> {
    const id = String(t.id)
    const hit = outputsCache.get(id)
    if (hit) {
      outputsCache.delete(id)
      outputsCache.set(id, hit)
      return hit
    }
    const parsed = t.template && typeof t.template === 'object' && Object.keys(t.template).length ? (t.template as Record<string, unknown>) : null
    const stored = { source: parsed ? null : String(t.source), parsed, environment: t.environment, parameters: t.parameters as Record<string, unknown>, stackName: String(stack.name), stackId: String(stack.id), projectId: String(stack.project_id) }
    const loading = definitionOf(stored, { outputsOnly: true }).then((def) => def.outputs)
    loading.catch(() => outputsCache.delete(id))
    outputsCache.set(id, loading)
    if (outputsCache.size > OUTPUTS_CACHE_SIZE) outputsCache.delete(outputsCache.keys().next().value!)
    return loading
  }

  async function stackRow(actor: Actor, ref: string): Promise<Record<string, unknown>> {
    const byId = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(ref)
    const row = await stackForRead(pool, actor.projectId, ref, byId)
    if (!row) throw new NotFoundError(`stack ${ref} not found`)
    return row
  }

  async function templateOf(templateId: string | null) {
    if (!templateId) return null
    return templateById(pool, templateId)
  }

  /** Parameter values with hidden ones masked. */
  function maskedParameters(t: { template: Record<string, unknown>; parameters: Record<string, unknown> } | null): Record<string, unknown> {
    if (!t) return {}
    const schemas = (t.template.parameters ?? {}) as Record<string, { hidden?: unknown; default?: unknown }>
    const out: Record<string, unknown> = {}
    for (const [name, s] of Object.entries(schemas)) {
      const v = name in t.parameters ? t.parameters[name] : s?.default
      out[name] = s?.hidden === true || s?.hidden === 'true' ? MASK : v ?? null
    }
    return out
  }

  function maskAttributes(type: string, attrs: Record<string, unknown> | null, secrets: Secrets): Record<string, unknown> {
    const t = registry.get(type)
    if (!attrs) return {}
    return Object.fromEntries(Object.entries(attrs).map(([k, v]) => [k, t?.attributes[k]?.secret ? MASK : redact(v, secrets)]))
  }

  function maskProperties(type: string, props: Record<string, unknown> | null, secrets: Secrets): Record<string, unknown> | null {
    if (!props) return null
    const t = registry.get(type)
    // A large value (a file's content) is cut to what its schema shows (shownUpToBytes).
    return Object.fromEntries(Object.entries(props).map(([k, v]) => [k, t?.properties[k]?.secret ? MASK : shownValue(t?.properties[k], redact(v, secrets))]))
  }

  /** A drift finding's changes as shown: secret properties masked, hidden values redacted, long values cut. */
  function maskChanges(type: string | null, changes: StoredDrift['results'][number]['changes'], secrets: Secrets) {
    const shown = (v: unknown, property: string) => maskProperties(type ?? '', { [property]: v }, secrets)![property]
    return changes.map((c) => ({ property: c.property, stored: shown(c.stored, c.property), seen: shown(c.seen, c.property) }))
  }

  /** The stack's latest drift check, as shown (masked), or null if none ran. */
  async function driftOf(stackId: unknown, secrets: Secrets) {
    const d = await latestDrift(pool, String(stackId))
    if (!d) return null
    const resources = d.results.map((r) => ({
      name: r.resourceName,
      resourceId: r.resourceId,
      type: r.type,
      physicalId: r.physicalId,
      state: r.state as DriftState,
      changes: maskChanges(r.type, r.changes, secrets),
      problems: r.problems.map((p) => redact(p, secrets)),
      observedAt: iso(r.observedAt)!,
    }))
    const count = (s: DriftState) => resources.filter((r) => r.state === s).length
    return {
      traversalId: d.traversal.id,
      status: d.traversal.outcome ?? 'IN_PROGRESS',
      statusReason: redact(d.traversal.outcomeReason, secrets),
      startedBy: d.traversal.startedBy,
      startedAt: iso(d.traversal.startedAt)!,
      endedAt: iso(d.traversal.endedAt),
      current: d.current,
      summary: { inSync: count('IN_SYNC'), modified: count('MODIFIED'), deleted: count('DELETED'), notChecked: count('NOT_CHECKED') },
      resources,
    }
  }

  /**
   * Every secret of the stack, longest first: its hidden parameters' values, the values of its rows'
   * secret attributes (and properties), and the forms each row's properties were derived from.
   */
  async function stackSecrets(stackId: unknown): Promise<Secrets> {
    const [hidden, rows] = await Promise.all([hiddenSecrets(stackId), rowSecrets(stackId)])
    return rows.size ? secretList([...hidden.texts, ...rows]) : hidden
  }

  /** What the stack's rows hold that is secret (rows change: read each time, one indexed query). */
  async function rowSecrets(stackId: unknown): Promise<Set<string>> {
    const rows = await secretHoldingRows(pool, String(stackId), secretTypes, propertySecretTypes)
    const out = new Set<string>()
    for (const r of rows) {
      for (const f of (r.secret_forms as string[] | null) ?? []) out.add(f)
      addSecretValues(registry.get(String(r.type)), r, out)
    }
    return out
  }

  /**
   * Every form of every hidden parameter value any template of the stack was given (request,
   * environment or default): rows, events and reasons of earlier templates may still hold old values.
   */
  async function hiddenSecrets(stackId: unknown): Promise<Secrets> {
    // Templates are only ever added: their count and newest time say whether the cached list still holds.
    const k = await templateVersionKey(pool, String(stackId))
    const key = `${k?.n}|${k?.at ? new Date(k.at).getTime() : ''}`
    const cached = secretsCache.get(String(stackId))
    if (cached?.key === key) return cached.secrets
    const rows = await hiddenParameterTemplates(pool, String(stackId))
    const out = new Set<string>()
    for (const r of rows) {
      const env = (r.environment ?? {}) as Record<string, Record<string, unknown> | undefined>
      hiddenForms(r.schemas, [r.parameters, env.parameters, env.parameter_defaults], out)
    }
    const secrets = secretList(out)
    secretsCache.delete(String(stackId))
    secretsCache.set(String(stackId), { key, secrets })
    if (secretsCache.size > 1000) secretsCache.delete(secretsCache.keys().next().value as string)
    return secrets
  }

  /** The environment as stored, with hidden parameters' entries masked. */
  function maskEnvironment(t: { template: Record<string, unknown>; environment: Record<string, unknown> | null }, secrets: Secrets): Record<string, unknown> {
    const env = { ...((t.environment ?? {}) as Record<string, unknown>) }
    const schemas = (t.template.parameters ?? {}) as Record<string, { hidden?: unknown } | null>
    for (const section of ['parameters', 'parameter_defaults']) {
      const values = env[section]
      if (!values || typeof values !== 'object') continue
      env[section] = Object.fromEntries(Object.entries(values as Record<string, unknown>).map(([k, v]) => [k, schemas[k]?.hidden === true || schemas[k]?.hidden === 'true' ? MASK : v]))
    }
    return redact(env, secrets)
  }

  /**
   * The stack's outputs. One evaluated from a secret (or whose value holds one) is `sensitive`:
   * its value is masked whole, unless it is the output named by `reveal`.
   */
  async function outputs(stack: Record<string, unknown>, reveal: string | null = null, known?: Secrets): Promise<Record<string, ResolvedOutput>> {
    const t = await templateOf((stack.raw_template_id as string | null) ?? null)
    if (!t) return {}
    let snippets: Record<string, OutputSnippet>
    try {
      snippets = await staticOutputs(t, stack)
    } catch (err) {
      return { _error: { value: null, error: redact((err as Error).message, known ?? (await stackSecrets(stack.id))) } }
    }
    if (!Object.keys(snippets).length) return {}
    const rows = await outputSourceRows(pool, String(stack.id))
    const values = rows.map((r) => ({
      name: String(r.name),
      physicalId: (r.physical_id as string | null) ?? null,
      attributes: (r.attributes as Record<string, unknown> | null) ?? null,
      secretAttributes: secretsOfType(registry.get(String(r.type))).attributes,
      secretForms: (r.secret_forms as string[] | null) ?? [],
    }))
    let resolved: Record<string, ResolvedOutput>
    try {
      resolved = await outputsOf(snippets, values)
    } catch (err) {
      // Outputs that need more than the budget (on an evaluation thread, under the time limit) say so.
      if (!(err instanceof BudgetExceeded)) throw err
      resolved = Object.fromEntries(Object.entries(snippets).map(([k, o]) => [k, { ...(o.description !== undefined ? { description: o.description } : {}), value: null, error: err.message }]))
    }
    const secrets = known ?? (await stackSecrets(stack.id))
    return Object.fromEntries(
      Object.entries(resolved).map(([k, o]) => {
        const shown: ResolvedOutput = { ...(o.description !== undefined ? { description: redact(o.description, secrets) } : {}), value: null }
        if (o.error !== undefined) shown.error = redact(o.error, secrets)
        if (o.sensitive || holdsSecret(o.value, secrets)) {
          // Masked whole, not piece by piece: what is left of a secret's text around a mask may still give it away.
          if (o.error === undefined) shown.value = reveal === k ? o.value : MASK
          shown.sensitive = true
        } else shown.value = o.value
        return [k, shown]
      }),
    )
  }

  /** A stack as shown, but for its outputs. Of its template, only the description and parameters are read (not the text, not every resource). */
  async function details(s: Record<string, unknown>) {
    const progress = await stackProgress(pool, String(s.id))
    const t = await templateHeading(pool, (s.raw_template_id as string | null) ?? null)
    const secrets = await stackSecrets(s.id)
    return {
      ...summary({ ...s, ...progress, status_reason: redact(String(s.status_reason), secrets) }),
      projectId: String(s.project_id),
      description: typeof t?.template?.description === 'string' ? (t.template.description as string) : '',
      timeoutMins: Number(s.timeout_mins),
      disableRollback: Boolean(s.disable_rollback),
      templateId: (s.raw_template_id as string | null) ?? null,
      parameters: maskedParameters(t),
      deletedAt: iso(s.deleted_at),
      lastSeq: Number(s.last_seq),
    }
  }

  return {
    stackRow,

    async list(actor: Actor, q: ListQuery): Promise<{ stacks: StackSummary[]; next: string | null }> {
      let after: { at: string; id: string } | undefined
      if (q.marker) {
        const [at, id] = Buffer.from(q.marker, 'base64url').toString().split('|')
        if (!at || !id || Number.isNaN(Date.parse(at))) throw new ValidationError('invalid marker')
        after = { at, id }
      }
      const rows = await listStacks(pool, actor.projectId, { status: q.status?.toUpperCase(), name: q.name, limit: q.limit + 1, after })
      const page = rows.slice(0, q.limit)
      const last = page.at(-1)
      return {
        stacks: page.map(summary),
        next: rows.length > q.limit && last ? Buffer.from(`${new Date(last.created_at).toISOString()}|${last.id}`).toString('base64url') : null,
      }
    },

    async show(actor: Actor, ref: string) {
      const s = await stackRow(actor, ref)
      return { ...(await details(s)), outputs: await outputs(s) }
    },

    /** The stack without its outputs (resolving them evaluates the template): what the live view asks for. */
    showSummary: async (actor: Actor, ref: string) => details(await stackRow(actor, ref)),

    async template(actor: Actor, ref: string) {
      const s = await stackRow(actor, ref)
      const t = await templateOf((s.raw_template_id as string | null) ?? null)
      if (!t) throw new NotFoundError('the stack has no template')
      // The template (its text and defaults) is returned as written, as Heat does; values given with requests are not.
      return { source: String(t.source), template: t.template as Record<string, unknown>, environment: maskEnvironment(t, await stackSecrets(s.id)), parameters: maskedParameters(t) }
    },

    /** The stack's resource rows (`all`: deleted ones too; `id`: that row alone, deleted or not). */
    async resources(actor: Actor, ref: string, opts: { all?: boolean; id?: number } = {}) {
      const s = await stackRow(actor, ref)
      const secrets = await stackSecrets(s.id)
      // The latest drift check's finding per row, while no later operation may have changed the rows.
      const drift = await driftOf(s.id, secrets)
      const driftOfRow = new Map(drift?.current ? drift.resources.map((d) => [d.resourceId, d]) : [])
      // A resource's `description` (a key of its definition) as the stack's template gives it.
      const defs = ((await templateResources(pool, (s.raw_template_id as string | null) ?? null)) ?? {}) as Record<string, { description?: unknown } | null>
      const descriptionOf = (name: string) => {
        const d = Object.hasOwn(defs, name) ? defs[name]?.description : undefined
        return typeof d === 'string' ? redact(d, secrets) : ''
      }
      const rows = await listResources(pool, String(s.id), opts)
      return rows.map((r) => ({
        id: Number(r.id),
        uuid: String(r.uuid),
        name: String(r.name),
        type: String(r.type),
        action: String(r.action),
        status: String(r.status),
        statusReason: redact(String(r.status_reason), secrets),
        description: descriptionOf(String(r.name)),
        physicalId: (r.physical_id as string | null) ?? null,
        properties: maskProperties(String(r.type), r.properties, secrets),
        attributes: maskAttributes(String(r.type), r.attributes, secrets),
        requires: (r.requires as number[]) ?? [],
        replaces: (r.replaces as number | null) ?? null,
        replacedBy: (r.replaced_by as number | null) ?? null,
        current: r.current_template_id !== null && r.current_template_id === s.raw_template_id,
        lock: lockOf(r),
        waiter: r.waiter_traversal_id ? { traversalId: String(r.waiter_traversal_id), isUpdate: Boolean(r.waiter_is_update) } : null,
        lastTraversalId: (r.last_traversal_id as string | null) ?? null,
        drift: rowDrift(driftOfRow.get(Number(r.id)), drift?.traversalId),
        createdAt: iso(r.created_at)!,
        updatedAt: iso(r.updated_at)!,
      }))
    },

    /**
     * The snapshots the stack's resources kept when they were deleted (deletion_policy: Snapshot), also once
     * the stack is deleted (by its id): each restorable into a new database of the project (from_snapshot).
     */
    async snapshots(actor: Actor, ref: string) {
      const s = await stackRow(actor, ref)
      const rows = await listSnapshots(pool, actor.projectId, String(s.id))
      return rows.map((r) => ({ name: String(r.key), of: String(r.snapshot_of), resource: String(r.resource_name), state: String(r.state), takenAt: iso(r.created_at)! }))
    },

    /** The latest drift check of the stack (`GET /api/stacks/{stack}/drift`). */
    async drift(actor: Actor, ref: string) {
      const s = await stackRow(actor, ref)
      const d = await driftOf(s.id, await stackSecrets(s.id))
      if (!d) throw new NotFoundError(`no drift check has run on stack ${String(s.name)}; start one with POST /api/stacks/{stack}/drift`)
      return { stackId: String(s.id), stackName: String(s.name), ...d }
    },

    async events(actor: Actor, ref: string, q: { after?: number; limit: number; resource?: string; traversal?: string }) {
      const s = await stackRow(actor, ref)
      // `current` is resolved from the same stack row as lastSeq, so the answer says which traversal it is.
      const traversal = q.traversal === 'current' ? ((s.current_traversal_id as string | null) ?? null) : q.traversal
      if (q.traversal === 'current' && traversal === null) return { stackId: String(s.id), lastSeq: Number(s.last_seq), traversalId: null, events: [] }
      const rows = await eventsPage(pool, String(s.id), { ...q, after: q.after ?? 0, ...(traversal ? { traversal } : {}) })
      const secrets = rows.length ? await stackSecrets(s.id) : []
      const events = rows.map((r) => ({
        seq: Number(r.seq),
        traversalId: (r.traversal_id as string | null) ?? null,
        kind: String(r.kind),
        resourceId: r.resource_id === null ? null : Number(r.resource_id),
        resourceName: (r.resource_name as string | null) ?? null,
        physicalId: (r.physical_id as string | null) ?? null,
        action: (r.action as string | null) ?? null,
        status: (r.status as string | null) ?? null,
        reason: redact(String(r.reason), secrets),
        data: redact((r.data as Record<string, unknown> | null) ?? null, secrets),
        at: iso(r.created_at)!,
      }))
      return { stackId: String(s.id), lastSeq: Number(s.last_seq), ...(q.traversal ? { traversalId: traversal ?? null } : {}), events }
    },

    async traversals(actor: Actor, ref: string) {
      const s = await stackRow(actor, ref)
      const rows = await listTraversals(pool, String(s.id))
      const secrets = await stackSecrets(s.id)
      return rows.map((r) => ({
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
      }))
    },

    async graph(actor: Actor, ref: string, traversalId: string | 'current', format: 'json' | 'dot' | 'graphml') {
      const s = await stackRow(actor, ref)
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
    },

    outputs: async (actor: Actor, ref: string) => outputs(await stackRow(actor, ref)),

    /**
     * One traversal (its id, or `current`: the stack's, else its latest) and the
     * resource type of every row of the stack by type, which the stored graph
     * does not carry: what the live view and the history need beside the graph
     * and the events.
     */
    async traversal(actor: Actor, ref: string, traversalId: string | 'current') {
      const s = await stackRow(actor, ref)
      const r = await traversalForRead(pool, String(s.id), traversalId === 'current' ? { current: (s.current_traversal_id as string | null) ?? null } : { id: traversalId })
      if (!r) throw new NotFoundError(`traversal ${traversalId} not found`)
      const secrets = await stackSecrets(s.id)
      const types = await resourceIdsByType(pool, String(s.id))
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
        stackLastSeq: Number(s.last_seq),
        types,
      }
    },

    /** The template a traversal ran with: its text as written, environment and parameters (hidden ones masked). */
    async traversalTemplate(actor: Actor, ref: string, traversalId: string) {
      const s = await stackRow(actor, ref)
      const templateId = await traversalTemplateId(pool, String(s.id), traversalId)
      if (!templateId) throw new NotFoundError(`traversal ${traversalId} not found`)
      const t = await templateOf(templateId)
      if (!t) throw new NotFoundError('the traversal has no template')
      return { source: String(t.source), environment: maskEnvironment(t, await stackSecrets(s.id)), parameters: maskedParameters(t) }
    },

    /**
     * Names (`hostname:pid`) of the workers the stack's events name, by id: the
     * page shows lock holders with them. Only ids asked for (from those events)
     * are answered: what machines run the workers is not every member's
     * business (the health details are an admin's).
     */
    async workers(actor: Actor, ref: string, ids: string[]) {
      await stackRow(actor, ref)
      const rows = await workersByIds(pool, ids)
      return rows.map((w) => ({ id: String(w.id), name: `${w.hostname}:${w.pid}`, state: String(w.state), stoppedAt: iso(w.stopped_at) }))
    },

    /** One output; a sensitive one's value only with `reveal` (an explicit request by a member of the project). */
    async output(actor: Actor, ref: string, key: string, opts: { reveal: boolean }): Promise<ResolvedOutput> {
      const all = await outputs(await stackRow(actor, ref), opts.reveal ? key : null)
      if (!Object.hasOwn(all, key)) throw new NotFoundError(`output ${key} not found`)
      return all[key]!
    },
  }
}

export type ReadService = ReturnType<typeof createReadService>
export type { StackRecord }
