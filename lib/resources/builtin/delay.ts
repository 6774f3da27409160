/**
 * OS::Heat::Delay, as Heat defines it (heat/engine/resources/openstack/heat/delay.py):
 * the actions it names (CREATE by default) take `min_wait` seconds plus a
 * random jitter of up to `max_jitter` × `jitter_multiplier` seconds, so that
 * what depends on it starts later (spreading out a burst, waiting for
 * something to settle). It waits parked: the node holds no worker slot, and
 * a cancel or a delete stops the wait at once.
 */
import { defineResourceType, ResourceActionError, type ResourceContext } from '../../sdk'
import { observeStored } from './util'

/** The longest delay, as a wait condition's longest timeout: half a day. */
const MAX_DELAY_SECS = 43_200
const DELAYED_ACTIONS = ['CREATE', 'UPDATE', 'DELETE', 'SUSPEND', 'RESUME']

async function delay(ctx: ResourceContext, props: Record<string, unknown>, action: 'CREATE' | 'UPDATE' | 'DELETE'): Promise<void> {
  const actions = (props.actions as string[] | undefined) ?? ['CREATE']
  if (!actions.includes(action)) return
  // Woken when the delay is over; woken sooner (a wake that came between the look and the park): wait on.
  if (ctx.resumed?.due) return
  let until = ctx.resumed?.until
  if (!until) {
    const min = Number(props.min_wait ?? 0)
    const jitter = Number(props.max_jitter ?? 0) * Number(props.jitter_multiplier ?? 1)
    if (min + jitter > MAX_DELAY_SECS) throw new ResourceActionError(`min_wait + max_jitter × jitter_multiplier is ${min + jitter} s; at most ${MAX_DELAY_SECS} s`)
    const secs = min + Math.random() * jitter
    if (secs <= 0) return
    until = new Date(Date.now() + secs * 1000)
  }
  ctx.park({ reason: `delaying ${action} until ${until.toISOString()}`, until })
}

const seconds = (description: string, def: number) => ({ type: 'number' as const, default: def, updateAllowed: true, constraints: [{ range: { min: 0 } }], description })

export const delayResource = defineResourceType({
  name: 'OS::Heat::Delay',
  description: 'Delays the actions it names (CREATE by default) by min_wait seconds plus a random jitter, so that what depends on it starts later. It waits holding no worker.',
  properties: {
    min_wait: seconds('Seconds to wait at least during the actions named.', 0),
    max_jitter: seconds('Most jitter to add to min_wait, in units of jitter_multiplier seconds.', 0),
    jitter_multiplier: seconds('Seconds per unit of max_jitter.', 1),
    actions: {
      type: 'list',
      default: ['CREATE'],
      updateAllowed: true,
      items: { type: 'string', constraints: [{ allowed_values: DELAYED_ACTIONS }] },
      description: 'The actions to delay: CREATE, UPDATE, DELETE (SUSPEND and RESUME are accepted, as in Heat, and Kiln has neither).',
    },
  },
  attributes: {},
  async create(ctx, props) {
    await delay(ctx, props, 'CREATE')
    return { physicalId: ctx.physicalName }
  },
  async update(ctx, props) {
    await delay(ctx, props, 'UPDATE')
    return {}
  },
  async delete(ctx, state) {
    await delay(ctx, state.properties, 'DELETE')
  },
  observe: observeStored,
})
