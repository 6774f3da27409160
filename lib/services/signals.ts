/**
 * Signals to resources that take them (OS::Heat::WaitConditionHandle, and a
 * provider's type that declares `signal`, which is passed on to it): from a
 * project's token or session, or from the handle's own token, which can do
 * nothing else (Heat's TOKEN_SIGNAL). A signal is stored and its waiters woken
 * in one transaction (lib/db/queries/signals.ts).
 */
import type { Db } from '../db/client'
import { clearHook, signalTarget, signalTargetByUuid, storeSignal, type SignalTarget } from '../db/queries/signals'
import { HOOK_TYPES, isHookType } from '../template/hooks'
import { SIGNALLED_HANDLES, signalTokenHash, signalTokenRow, WAIT_CONDITION_HANDLE } from '../resources/builtin/wait-condition'
import { ConflictError, NotFoundError, ValidationError } from '../plan/errors'
import { silentLogger, type Logger } from '../logger'
import { outsideRun, refusingObjects } from '../resources/outside-run'
import { ResourceActionError, type ResourceContext, type ResourceType, type ResourceTypeConfig, type SignalDetails } from '../resources/types'

/** Who may signal: a project member (any of its stacks' handles), or one handle's token (that handle only). */
export type Signaller = { projectId: string } | { handleUuid: string }

/** The signaller a request's principal stands for. */
export const signalFrom = (p: { via: string; projectId: string; signalHandle?: string }): Signaller =>
  p.via === 'signal' && p.signalHandle ? { handleUuid: p.signalHandle } : { projectId: p.projectId }

export interface SignalBody {
  status?: 'SUCCESS' | 'FAILURE'
  reason?: string
  data?: unknown
  id?: string | number
  unset_hook?: string
}

export interface SignalServiceOptions {
  /** The types, for a signal to a resource whose type takes signals itself (a provider's that declares `signal`). */
  types?: { get(name: string): ResourceType | undefined }
  typeConfig?: ResourceTypeConfig
  log?: Logger
}

/** How long a type's own signal handler may take (a provider's answer). */
const TYPE_SIGNAL_TIMEOUT_MS = 60_000

export function createSignalService(pool: Db['pool'], opts: SignalServiceOptions = {}) {
  /** A signal to a resource whose type takes it (ResourceType.signal), in this process. */
  async function typeSignal(target: SignalTarget, type: ResourceType, body: SignalBody): Promise<{ id: string; count: number }> {
    const ctx: ResourceContext = {
      ...outsideRun('a resource signal'),
      projectId: target.projectId,
      stackId: target.stackId,
      stackName: target.stackName,
      resourceName: target.name,
      resourceUuid: target.uuid,
      replacesUuid: null,
      physicalName: target.physicalId ?? target.name,
      signal: AbortSignal.timeout(TYPE_SIGNAL_TIMEOUT_MS),
      log: opts.log ?? silentLogger,
      config: opts.typeConfig ?? { workspaceDir: '/nonexistent' },
      objects: refusingObjects('a resource signal'),
    }
    const details: SignalDetails = { ...(body.status ? { status: body.status } : {}), ...(body.reason !== undefined ? { reason: body.reason } : {}), ...(body.data !== undefined ? { data: body.data } : {}), ...(body.id !== undefined ? { id: body.id } : {}) }
    try {
      await type.signal!(ctx, { physicalId: target.physicalId, properties: target.properties, attributes: target.attributes, data: target.data ?? {} }, details)
    } catch (err) {
      if (err instanceof ResourceActionError) throw new ValidationError(`resource ${target.name}: ${err.message}`)
      throw err
    }
    return { id: body.id === undefined ? 'signal' : String(body.id), count: 1 }
  }

  /** Heat's `unset_hook`: the node of `resource` waiting at `hook` goes on (lib/template/hooks.ts). */
  async function clearHookOf(who: Signaller, stackId: string, resource: string, hook: string): Promise<{ id: string; count: number }> {
    // A handle's own token signals that handle and nothing else.
    if (!('projectId' in who)) throw new NotFoundError(`resource ${resource} not found`)
    if (!isHookType(hook)) throw new ValidationError(`Invalid hook type "${hook}" for ${resource}: Kiln's hooks are ${HOOK_TYPES.join(', ')}`)
    if (!(await clearHook(pool, stackId, resource, hook))) throw new ValidationError(`The "${hook}" hook is not defined on ${resource}: no node of it waits at that hook`)
    return { id: 'unset_hook', count: 1 }
  }

  return {
    /** The handle a signal token may signal, or null when the token is not a valid one. */
    async tokenHandle(token: string): Promise<SignalTarget | null> {
      const uuid = signalTokenRow(token)
      if (!uuid) return null
      const row = await signalTargetByUuid(pool, uuid)
      if (!row || !SIGNALLED_HANDLES.includes(row.type) || row.data?.tokenHash !== signalTokenHash(token)) return null
      if (row.action === 'DELETE' && row.status === 'COMPLETE') return null
      return row
    },

    /** Signal `resource` of the stack `stackId` (already resolved within the caller's project). */
    async signal(who: Signaller, stackId: string, resource: string, body: SignalBody): Promise<{ id: string; count: number }> {
      if (body.unset_hook !== undefined) return clearHookOf(who, stackId, resource, body.unset_hook)
      const target = await signalTarget(pool, stackId, resource)
      if (!target || ('projectId' in who && target.projectId !== who.projectId)) throw new NotFoundError(`resource ${resource} not found`)
      if ('handleUuid' in who && target.uuid !== who.handleUuid) throw new NotFoundError(`resource ${resource} not found`)
      const own = SIGNALLED_HANDLES.includes(target.type) ? undefined : opts.types?.get(target.type)
      if (!SIGNALLED_HANDLES.includes(target.type) && !own?.signal) throw new ValidationError(`resource ${resource} (${target.type}) does not take signals; signal an ${WAIT_CONDITION_HANDLE}, or a provider's type that declares signal`)
      if (!target.physicalId || target.status !== 'COMPLETE' || !['CREATE', 'UPDATE', 'CHECK'].includes(target.action)) {
        throw new ConflictError(`resource ${resource} is ${target.action}_${target.status}; it takes signals once it is created`)
      }
      if (own) return typeSignal(target, own, body)
      return storeSignal(pool, {
        stackId,
        handle: target.physicalId,
        id: body.id === undefined ? null : String(body.id),
        status: body.status ?? 'SUCCESS',
        reason: body.reason ?? null,
        data: body.data ?? null,
      })
    },
  }
}

export type SignalService = ReturnType<typeof createSignalService>
