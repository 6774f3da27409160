/**
 * A provider's resource types: each a ResourceType whose actions are
 * requests to the provider (./protocol.ts), so that the engine treats them
 * as it treats the built-in ones: locks, supersede and retrigger, abort,
 * observe, drift and converge, adopt.
 *
 * A long operation (202) parks the node: it holds no worker slot while the
 * provider works. It wakes on the provider's callback (a signal to the
 * row's handle `provider <row uuid>`, which the callback route fires) or
 * when the time the provider gave, or a back-off, is up; the action then
 * runs again from its start and asks again with the same idempotency key,
 * and the provider answers how the operation ended, or 202 again. So a
 * duplicate or late callback only wakes a node to ask once more, and a
 * provider restarted mid-operation is asked again like any other.
 */
import crypto from 'node:crypto'
import { ReplaceRequired, ResourceActionError, type Adopted, type Observation, type PropertySchema, type ResourceContext, type ResourceState, type ResourceType, type SignalDetails } from '../types'
import { send, type ProviderEndpoint, type Reply, type SendOptions } from './client'
import { ActionReply, ObserveReply, type ActionReplyT, type ActionRequestT, type Operation, type TypeDeclT } from './protocol'
import { callbackSignature } from './signature'

export interface ProviderRecord extends ProviderEndpoint {
  id: string
  /** The project that registered it; null: registered by the admin, for every project. */
  projectId: string | null
  /** Its types are named `<prefix>::<type>`. */
  prefix: string
  types: TypeDeclT[]
}

export interface ProviderTypeOptions {
  /** Where Kiln's API is reached (callbacks). */
  publicUrl?: string
  /** Retry back-off (tests make it short). */
  backoffMs?: SendOptions['backoffMs']
  /** One answer's time limit (KILN_PROVIDER_TIMEOUT_MS). */
  timeoutMs?: number
}

/** The handle a provider's callback signals for a row: what its parked action waits on. */
export const callbackHandle = (resourceUuid: string) => `provider ${resourceUuid}`
/** The path of a row's callback URL; its signature is the provider secret's HMAC of it. */
export const callbackPath = (stackId: string, resourceUuid: string) => `/api/provider-callbacks/${stackId}/${resourceUuid}`

const MIN_POLL_MS = 1000
const MAX_POLL_MS = 60_000

function propertySchema(d: TypeDeclT['properties'][string]): PropertySchema {
  return {
    type: d.type,
    ...(d.description !== undefined ? { description: d.description } : {}),
    ...(d.required ? { required: true } : {}),
    ...(d.default !== undefined ? { default: d.default } : {}),
    // An immutable property is "updatable" so that its change reaches update(), which refuses it by name.
    ...(d.update_allowed || d.immutable ? { updateAllowed: true } : {}),
    ...(d.secret ? { secret: true } : {}),
  }
}

export function providerTypes(p: ProviderRecord, opts: ProviderTypeOptions = {}): ResourceType[] {
  return p.types.map((decl) => providerType(p, decl, opts))
}

function providerType(p: ProviderRecord, decl: TypeDeclT, opts: ProviderTypeOptions): ResourceType {
  const supports = (op: Operation) => decl.operations.includes(op)
  const immutable = Object.entries(decl.properties).filter(([, d]) => d.immutable).map(([k]) => k)
  const act = (ctx: ResourceContext, op: Operation, request: Partial<ActionRequestT>) => ask(p, decl, ctx, op, request, opts)
  const type: ResourceType = {
    name: `${p.prefix}::${decl.name}`,
    ...(p.projectId !== null ? { ownerProject: p.projectId } : {}),
    description: decl.description ?? `${decl.name}, from provider ${p.name}.`,
    properties: Object.fromEntries(Object.entries(decl.properties).map(([k, d]) => [k, propertySchema(d)])),
    attributes: Object.fromEntries(Object.entries(decl.attributes).map(([k, a]) => [k, { description: a.description ?? k, ...(a.type ? { type: a.type } : {}), ...(a.secret ? { secret: true } : {}) }])),
    async create(ctx, props) {
      const r = await act(ctx, 'create', { properties: props })
      return { physicalId: r.physical_id ?? ctx.physicalName, attributes: r.attributes ?? {}, data: r.data ?? {} }
    },
    async update(ctx, props, prev, changed) {
      const fixed = changed.filter((k) => immutable.includes(k))
      if (fixed.length) throw new ResourceActionError(`${fixed.join(', ')}: immutable (provider ${p.name} cannot change ${fixed.length > 1 ? 'them' : 'it'}); replace the resource under a new name instead`)
      if (!supports('update')) throw new ReplaceRequired(`provider ${p.name} cannot update ${decl.name} in place`)
      const r = await act(ctx, 'update', { properties: props, previous: previousOf(prev), changed })
      return { physicalId: r.physical_id ?? prev.physicalId, attributes: r.attributes ?? prev.attributes, data: r.data ?? prev.data }
    },
    async delete(ctx, state) {
      await act(ctx, 'delete', { properties: state.properties, previous: previousOf(state) })
    },
    needsReplaceFailed: () => (supports('update') ? null : `provider ${p.name} cannot repair ${decl.name} in place`),
  }
  if (supports('observe')) type.observe = (ctx, state) => observe(p, decl, ctx, state, opts)
  if (supports('adopt')) type.adopt = (ctx, externalId, o) => adopt(p, decl, ctx, externalId, o.dryRun, opts)
  if (supports('signal')) type.signal = (ctx, state, details) => signal(p, decl, ctx, state, details, opts)
  return type
}

const previousOf = (s: ResourceState) => ({ physical_id: s.physicalId, properties: s.properties, attributes: s.attributes, data: s.data })

function request(p: ProviderRecord, decl: TypeDeclT, ctx: ResourceContext, op: Operation, over: Partial<ActionRequestT>, opts: ProviderTypeOptions): ActionRequestT {
  const path = callbackPath(ctx.stackId, ctx.resourceUuid)
  const base = (opts.publicUrl ?? 'http://127.0.0.1:3000').replace(/\/+$/, '')
  return {
    protocol: 1,
    operation: op,
    type: decl.name,
    idempotency_key: `${ctx.traversalId ?? 'outside-a-traversal'}:${ctx.resourceUuid}:${op}`,
    deadline: (ctx.deadline ?? new Date(Date.now() + 3_600_000)).toISOString(),
    resource: { stack: ctx.stackName, stack_id: ctx.stackId, name: ctx.resourceName, uuid: ctx.resourceUuid, physical_name: ctx.physicalName, project_id: ctx.projectId },
    properties: {},
    ...(ctx.traversalId ? { callback: `${base}${path}?sig=${callbackSignature(p.secret, path)}` } : {}),
    ...over,
  }
}

/** The provider may act for this project: its own, or the admin's for everyone. */
function mayServe(p: ProviderRecord, ctx: ResourceContext): void {
  if (p.projectId !== null && p.projectId !== ctx.projectId) throw new ResourceActionError(`provider ${p.name} belongs to another project`)
}

/** One action: ask, and park while the provider works (202); ask again when woken, with the same key. */
async function ask(p: ProviderRecord, decl: TypeDeclT, ctx: ResourceContext, op: Operation, over: Partial<ActionRequestT>, opts: ProviderTypeOptions) {
  mayServe(p, ctx)
  const body = request(p, decl, ctx, op, over, opts)
  if (ctx.signal.aborted) {
    // Woken to stop while the provider worked on it: tell the provider, then stop.
    if (ctx.resumed && decl.operations.includes('cancel')) await cancel(p, body)
    ctx.signal.throwIfAborted()
  }
  const watch = ctx.traversalId ? await ctx.signals.watch(callbackHandle(ctx.resourceUuid)) : null
  let reply: Reply<ActionReplyT>
  try {
    reply = await send(p, op, body, ActionReply, { signal: ctx.signal, deadline: ctx.deadline, backoffMs: opts.backoffMs, timeoutMs: opts.timeoutMs })
  } catch (err) {
    if (ctx.signal.aborted && decl.operations.includes('cancel')) await cancel(p, body)
    throw err
  }
  switch (reply.kind) {
    case 'ok':
      return reply.value
    case 'refused':
      if (op === 'delete' && reply.status === 404) return {}
      if (op === 'update' && reply.replace) throw new ReplaceRequired(`provider ${p.name}: ${reply.error}`)
      throw new ResourceActionError(`provider ${p.name}: ${op} failed: ${reply.error}`)
    case 'accepted': {
      if (!watch) throw new ResourceActionError(`provider ${p.name} answered ${op} with 202 where Kiln cannot wait (outside a traversal)`)
      const now = Date.now()
      const waited = now - (ctx.resumed?.since.getTime() ?? now)
      const wait = reply.accepted.retry_after_ms ?? Math.min(MAX_POLL_MS, Math.max(MIN_POLL_MS, waited / 2))
      const until = new Date(Math.min(now + wait, ctx.deadline?.getTime() ?? Infinity))
      const what = [reply.accepted.operation && `operation ${reply.accepted.operation}`, reply.accepted.message].filter(Boolean).join(': ')
      return ctx.park({ reason: `waiting for provider ${p.name} to finish ${op}${what ? ` (${what})` : ''}`, until, wakeKey: watch.wakeKey, seen: watch.seen })
    }
  }
}

/** The counterpart of an abort: best effort, on its own short time limit (the action's signal has fired). */
async function cancel(p: ProviderRecord, body: ActionRequestT): Promise<void> {
  const signal = AbortSignal.timeout(5000)
  await send(p, 'cancel', { ...body, operation: 'cancel', idempotency_key: body.idempotency_key }, ActionReply, { signal, timeoutMs: 5000, backoffMs: () => 100 }).catch(() => {})
}

async function observe(p: ProviderRecord, decl: TypeDeclT, ctx: ResourceContext, state: ResourceState, opts: ProviderTypeOptions): Promise<Observation> {
  mayServe(p, ctx)
  const body = request(p, decl, ctx, 'observe', { properties: state.properties, previous: previousOf(state) }, opts)
  const reply = await send(p, 'observe', body, ObserveReply, { signal: ctx.signal, deadline: ctx.deadline, backoffMs: opts.backoffMs, timeoutMs: opts.timeoutMs })
  if (reply.kind === 'accepted') throw new ResourceActionError(`provider ${p.name} answered observe with 202; observe must answer at once`)
  if (reply.kind === 'refused') {
    if (reply.status === 404) return { state: 'gone' }
    throw new ResourceActionError(`provider ${p.name}: observe failed: ${reply.error}`)
  }
  const seen = reply.value
  if (!seen.exists) return { state: 'gone' }
  return { state: 'exists', properties: seen.properties ?? {}, ...(seen.attributes ? { attributes: seen.attributes } : {}), ...(seen.problems?.length ? { problems: seen.problems } : {}) }
}

async function adopt(p: ProviderRecord, decl: TypeDeclT, ctx: ResourceContext, externalId: string, dryRun: boolean, opts: ProviderTypeOptions): Promise<Adopted> {
  mayServe(p, ctx)
  const body = request(p, decl, ctx, 'adopt', { external_id: externalId, dry_run: dryRun }, opts)
  const reply = await send(p, 'adopt', body, ActionReply, { signal: ctx.signal, deadline: ctx.deadline, backoffMs: opts.backoffMs, timeoutMs: opts.timeoutMs })
  if (reply.kind === 'accepted') throw new ResourceActionError(`provider ${p.name} answered adopt with 202; adopt must answer at once`)
  if (reply.kind === 'refused') throw new ResourceActionError(`provider ${p.name}: external_id ${externalId}: ${reply.error}`)
  return { physicalId: reply.value.physical_id ?? externalId, properties: reply.value.properties ?? {}, attributes: reply.value.attributes ?? {}, data: reply.value.data ?? {} }
}

/** A resource signal, passed on to the provider: 200 takes it, a 4xx refuses it with its reason. */
async function signal(p: ProviderRecord, decl: TypeDeclT, ctx: ResourceContext, state: ResourceState, details: SignalDetails, opts: ProviderTypeOptions): Promise<void> {
  mayServe(p, ctx)
  // Each signal is its own request: a sender that sends the same id again is answered as before.
  const key = details.id !== undefined ? `signal:${ctx.resourceUuid}:${String(details.id)}` : `signal:${ctx.resourceUuid}:${crypto.randomUUID()}`
  const body = { ...request(p, decl, ctx, 'signal', { properties: state.properties, previous: previousOf(state), signal: details }, opts), idempotency_key: key }
  const reply = await send(p, 'signal', body, ActionReply, { signal: ctx.signal, backoffMs: opts.backoffMs, timeoutMs: opts.timeoutMs })
  if (reply.kind === 'accepted') return
  if (reply.kind === 'refused') throw new ResourceActionError(`provider ${p.name}: the signal was refused: ${reply.error}`)
}
