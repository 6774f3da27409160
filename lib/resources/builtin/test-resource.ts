/**
 * OS::Heat::TestResource, with Heat's properties and behaviour
 * (heat/engine/resources/openstack/heat/test_resource.py): it waits
 * `action_wait_secs.<action>` (or `wait_secs`) and then, if `fail` is set,
 * fails; `update_replace` turns every update into a replacement; `value` is
 * exposed as the attribute `output`. `client_name`/`entity_name` are stored:
 * there is no client to poll in Kiln.
 */
import { defineResourceType, ReplaceRequired, ResourceActionError, type PropertySchema, type ResourceContext } from '../../sdk'
import { testResourceReplaceReason } from '../replace-rules'
import { observeStored, waitWithProgress } from './util'

const waitSecs: PropertySchema = { type: 'number', updateAllowed: true, constraints: [{ range: { min: 0 } }] }

const properties: Record<string, PropertySchema> = {
  value: { type: 'string', default: 'test_string', updateAllowed: true, description: 'The input string to be stored.' },
  update_replace: { type: 'boolean', default: false, updateAllowed: true, description: 'Every update replaces the resource.' },
  update_replace_value: { type: 'string', description: 'Some value that can be stored but can not be updated (a change replaces the resource).' },
  fail: { type: 'boolean', default: false, updateAllowed: true, description: 'Fail create and update (after waiting), to test failure handling.' },
  client_name: { type: 'string', default: '', updateAllowed: true, description: 'Client to use in the resource-checking step (stored only).' },
  entity_name: { type: 'string', default: '', updateAllowed: true, description: 'Client entity to poll (stored only).' },
  wait_secs: { ...waitSecs, default: 0, description: 'Seconds to wait after an action (create, update, delete).' },
  action_wait_secs: {
    type: 'map',
    updateAllowed: true,
    description: 'Seconds to wait after each action; overrides wait_secs for that action.',
    schema: {
      create: { ...waitSecs, description: 'Seconds to wait after create.' },
      update: { ...waitSecs, description: 'Seconds to wait after update.' },
      delete: { ...waitSecs, description: 'Seconds to wait after delete.' },
    },
  },
  attr_wait_secs: { ...waitSecs, default: 0, description: 'Seconds to wait before resolving attributes (accepted; attributes are stored at once).' },
  constraint_prop_secs: { ...waitSecs, default: 0, description: 'Seconds a constraint check takes (accepted; validation is immediate).' },
}

function secondsFor(props: Record<string, unknown>, action: 'create' | 'update' | 'delete'): number {
  const per = (props.action_wait_secs as Record<string, number | undefined> | undefined)?.[action]
  return typeof per === 'number' ? per : Number(props.wait_secs ?? 0)
}

async function run(ctx: ResourceContext, props: Record<string, unknown>, action: 'create' | 'update' | 'delete'): Promise<void> {
  await waitWithProgress(secondsFor(props, action), ctx.signal, ctx.progress, `${action} waiting`)
  if (action !== 'delete' && props.fail === true) throw new ResourceActionError(`Test Resource failed ${ctx.resourceName}`)
}

export const testResource = defineResourceType({
  name: 'OS::Heat::TestResource',
  stateOnly: true,
  description: 'A resource that waits, fails or asks to be replaced on demand, for testing stacks.',
  properties,
  attributes: { output: { description: 'The string that was stored (the value property).', type: 'string', derivedFrom: ['value'] } },
  async create(ctx, props) {
    await run(ctx, props, 'create')
    return { physicalId: ctx.physicalName, attributes: { output: props.value } }
  },
  replaceOnUpdate: testResourceReplaceReason,
  async update(ctx, props) {
    // The engine asks replaceOnUpdate first; a caller that does not still gets "replace me".
    const why = testResourceReplaceReason(props)
    if (why) throw new ReplaceRequired(why)
    await run(ctx, props, 'update')
    return { attributes: { output: props.value } }
  },
  async delete(ctx, state) {
    await run(ctx, state.properties, 'delete')
  },
  async check(ctx, state) {
    if (state.properties.fail === true) throw new ResourceActionError(`Test Resource failed ${ctx.resourceName}`)
  },
  observe: observeStored,
})
