/**
 * OS::Heat::WaitConditionHandle and OS::Heat::WaitCondition, as Heat defines
 * them (heat/engine/resources/openstack/heat/wait_condition*.py): the handle
 * takes signals (`POST /api/stacks/<stack>/resources/<handle>/signal`, or
 * Heat's `…/resources/<handle>/signal`, or `openstack stack resource signal`),
 * and the wait condition's create or update completes once `count` SUCCESS
 * signals have arrived, fails at the first FAILURE, and fails when `timeout`
 * seconds pass first. Signals are kept until the handle is deleted, so an
 * update of the wait condition finds those already sent.
 *
 * The handle's `token` is a credential that can do one thing: signal that
 * handle (a script on a machine gets it instead of a project token). Only its
 * SHA-256 is kept where the API can check it; the token itself is a secret
 * attribute.
 */
import { createHash, randomBytes } from 'node:crypto'
import { defineResourceType, ResourceActionError, type ResourceContext, type ResourceSignal } from '../../sdk'
import { observeStored } from './util'

export const WAIT_CONDITION_HANDLE = 'OS::Heat::WaitConditionHandle'
export const SIGNAL_TOKEN_PREFIX = 'kiln_sig_'

export const signalTokenHash = (token: string) => createHash('sha256').update(token).digest('hex')

/** The row uuid a signal token names, if it has the token's shape. */
export function signalTokenRow(token: string): string | null {
  const m = /^kiln_sig_([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})_[A-Za-z0-9_-]{32,}$/.exec(token)
  return m ? m[1]! : null
}

function signalEndpoint(ctx: ResourceContext): string {
  const base = (ctx.config.publicUrl ?? 'http://127.0.0.1:3000').replace(/\/+$/, '')
  return `${base}/api/stacks/${ctx.stackId}/resources/${encodeURIComponent(ctx.resourceName)}/signal`
}

export const waitConditionHandleResource = defineResourceType({
  name: WAIT_CONDITION_HANDLE,
  description: 'Takes signals (POST …/resources/<name>/signal, with a project token or this handle’s own token) for an OS::Heat::WaitCondition to wait for.',
  properties: {
    signal_transport: {
      type: 'string',
      default: 'TOKEN_SIGNAL',
      description: 'How the handle is signalled: TOKEN_SIGNAL (an HTTP POST with the handle’s token or a project token). Heat’s other transports need services Kiln does not have.',
      constraints: [{ allowed_values: ['TOKEN_SIGNAL'], description: 'TOKEN_SIGNAL only' }],
    },
  },
  attributes: {
    token: { description: 'A token that can only signal this handle (X-Auth-Token); shown by a show of the handle alone.', type: 'string', secret: true, shownOnRequest: true },
    endpoint: { description: 'The URL to POST signals to.', type: 'string', derivedFrom: [], shownOnRequest: true },
    curl_cli: { description: 'A curl command line to signal with; append --data-binary \'{"status": "SUCCESS"}\' (or FAILURE). Shown by a show of the handle alone.', type: 'string', secret: true, shownOnRequest: true },
    signal: { description: 'JSON with the endpoint and the token; shown by a show of the handle alone.', type: 'string', secret: true, shownOnRequest: true },
  },
  async create(ctx) {
    const token = `${SIGNAL_TOKEN_PREFIX}${ctx.resourceUuid}_${randomBytes(24).toString('base64url')}`
    const endpoint = signalEndpoint(ctx)
    return {
      physicalId: ctx.physicalName,
      attributes: {
        token,
        endpoint,
        curl_cli: `curl -i -X POST -H 'X-Auth-Token: ${token}' -H 'Content-Type: application/json' -H 'Accept: application/json' ${endpoint}`,
        signal: JSON.stringify({ endpoint, token }),
      },
      data: { tokenHash: signalTokenHash(token) },
    }
  },
  async update() {
    return {}
  },
  async delete(ctx, state) {
    if (state.physicalId) await ctx.signals.clear(state.physicalId)
  },
  // Its signals are in Kiln's database too: nothing of it is outside Kiln.
  observe: observeStored,
})

export const UPDATE_WAIT_CONDITION_HANDLE = 'OS::Heat::UpdateWaitConditionHandle'
/** The types that take a wait condition's signals. */
export const SIGNALLED_HANDLES: readonly string[] = [WAIT_CONDITION_HANDLE, UPDATE_WAIT_CONDITION_HANDLE]

/**
 * Heat's UpdateWaitConditionHandle: a handle that every update of its stack
 * replaces, so the new one has no signals and the senders must signal again
 * (a rollout is complete only once they have). Like Heat's, it has no
 * properties; it is signalled as the other handle is.
 */
export const updateWaitConditionHandleResource = defineResourceType({
  ...waitConditionHandleResource,
  name: UPDATE_WAIT_CONDITION_HANDLE,
  description: 'A wait condition handle that every update of its stack replaces: the new one has no signals, so the senders must signal again.',
  properties: {},
  replaceOnEveryUpdate: true,
})

const describe = (signals: ResourceSignal[]) => signals.map((s) => s.reason).filter(Boolean).join('; ')

async function wait(ctx: ResourceContext, props: Record<string, unknown>) {
  const handle = String(props.handle)
  const count = Number(props.count ?? 1)
  const timeoutSecs = Number(props.timeout)
  ctx.progress(`waiting for ${count} signal(s) on ${handle}`, 0)
  const out = await ctx.signals.waitFor(handle, count, timeoutSecs * 1000)
  const ok = out.signals.filter((s) => s.status === 'SUCCESS')
  if (out.kind === 'failed') {
    throw new ResourceActionError(`WaitConditionFailure: ${describe(out.signals.filter((s) => s.status === 'FAILURE')) || 'a FAILURE signal was received'}`)
  }
  if (out.kind === 'timeout') {
    throw new ResourceActionError(`WaitConditionTimeout: ${ok.length} of ${count} received${ok.length ? ` (${describe(ok)})` : ''} within ${timeoutSecs} s`)
  }
  return { attributes: { data: JSON.stringify(Object.fromEntries(out.signals.map((s) => [s.id, s.data ?? null]))) } }
}

export const waitConditionResource = defineResourceType({
  name: 'OS::Heat::WaitCondition',
  description: 'Completes once its handle has received `count` SUCCESS signals; fails at a FAILURE signal or when `timeout` seconds pass first.',
  properties: {
    handle: { type: 'string', required: true, description: 'The handle to wait on: { get_resource: <an OS::Heat::WaitConditionHandle> }.' },
    timeout: { type: 'number', required: true, constraints: [{ range: { min: 1, max: 43200 } }], description: 'Seconds to wait for the signals.' },
    count: { type: 'integer', default: 1, updateAllowed: true, constraints: [{ range: { min: 1 } }], description: 'SUCCESS signals needed.' },
  },
  attributes: {
    // Made from the signals, not from the properties.
    data: { description: 'JSON: each signal’s id and the data it sent.', type: 'string', derivedFrom: [] },
  },
  async create(ctx, props) {
    const out = await wait(ctx, props)
    return { physicalId: ctx.physicalName, ...out }
  },
  async update(ctx, props) {
    return wait(ctx, props)
  },
  async delete() {},
  observe: observeStored,
})
