/**
 * No input silently ignored: each of Heat's inputs below either works as in
 * Heat or is refused with a 400 naming it, over Kiln's API and Heat's.
 *   honoured: deletion_policy given as a function, a resource's description,
 *     immutable parameters, clear_parameters (PATCH), tags on update;
 *   refused: event_sinks, parameter_merge_strategies, encrypted_param_names
 *     (when not empty), update_policy, custom_constraint, files_container,
 *     adopt_stack_data, clear_parameters on an update that reuses no stored
 *     parameters.
 */
import fs from 'node:fs'
import path from 'node:path'
import { describe, expect, test } from 'vitest'
import { useKilnEnv } from '../helpers/stack-env'

const { cluster: c, api } = useKilnEnv({ cluster: { workers: 1 } })

const V = '2018-08-31'
let n = 0
const name = () => `inputs-${++n}`

async function create(body: Record<string, unknown>): Promise<string> {
  const r = await api.call('POST', '/api/stacks', { body: { name: name(), ...body } })
  expect(r.status, r.text).toBe(201)
  expect(await c.settle(r.body.stack.id)).toBe('CREATE_COMPLETE')
  return r.body.stack.id
}

/** The paths a 400's issues name. */
async function refused(method: string, url: string, body: unknown): Promise<string[]> {
  const r = await api.call(method, url, { body })
  expect(r.status, r.text).toBe(400)
  return (r.body.error?.issues ?? []).map((i: { path: string }) => i.path)
}

describe('refused, naming the input', () => {
  test('environment sections Kiln cannot honour, when they say anything', async () => {
    const template = { heat_template_version: V, resources: { v: { type: 'OS::Heat::Value', properties: { value: 1 } } } }
    for (const [section, value] of [['event_sinks', [{ type: 'zaqar-queue', target: 'q' }]], ['parameter_merge_strategies', { default: 'merge' }], ['encrypted_param_names', ['p']]] as const) {
      expect(await refused('POST', '/api/stacks', { name: name(), template, environment: { [section]: value } })).toEqual([`environment.${section}`])
    }
    // Empty, they ask for nothing.
    await create({ template, environment: { event_sinks: [], parameter_merge_strategies: {} } })
  })

  test('update_policy on a type that has none; an empty one asks for nothing', async () => {
    const with_ = (update_policy: unknown) => ({ heat_template_version: V, resources: { t: { type: 'OS::Heat::TestResource', update_policy } } })
    expect(await refused('POST', '/api/stacks', { name: name(), template: with_({ rolling_update: { max_batch_size: 1 } }) })).toEqual(['resources.t.update_policy'])
    await create({ template: with_({}) })
  })

  test("a parameter's custom_constraint (Heat's look values up in OpenStack services)", async () => {
    const template = { heat_template_version: V, parameters: { flavor: { type: 'string', default: 'm1.small', constraints: [{ custom_constraint: 'nova.flavor' }] } }, resources: {} }
    expect(await refused('POST', '/api/stacks', { name: name(), template })).toEqual(['parameters.flavor.constraints[0].custom_constraint'])
  })

  test("Heat's files_container and adopt_stack_data", async () => {
    const template = { heat_template_version: V, resources: {} }
    for (const [key, value] of [['files_container', 'c'], ['adopt_stack_data', '{}']] as const) {
      const r = await api.call('POST', `/v1/${api.a.projectId}/stacks`, { body: { stack_name: name(), template, [key]: value } })
      expect(r.status, r.text).toBe(400)
      expect(r.text).toContain(`${key}`)
    }
  })

  test('deletion_policy given as a function that does not give one, or that depends on a resource', async () => {
    const template = (deletion_policy: unknown) => ({
      heat_template_version: V,
      parameters: { keep: { type: 'string', default: 'Forever' } },
      resources: { v: { type: 'OS::Heat::Value', properties: { value: 'x' } }, t: { type: 'OS::Heat::TestResource', deletion_policy } },
    })
    expect(await refused('POST', '/api/stacks', { name: name(), template: template({ get_param: 'keep' }) })).toEqual(['resources.t.deletion_policy'])
    expect(await refused('POST', '/api/stacks', { name: name(), template: template({ get_attr: ['v', 'value'] }) })).toEqual(['resources.t.deletion_policy'])
  })
})

describe('honoured as in Heat', () => {
  test('deletion_policy from a parameter: Retain keeps the file when the stack is deleted', async () => {
    const template = {
      heat_template_version: V,
      parameters: { keep: { type: 'string', default: 'Retain' } },
      resources: { f: { type: 'Kiln::File', properties: { path: 'kept/by-param.txt', content: 'kept' }, deletion_policy: { get_param: 'keep' } } },
    }
    const id = await create({ template })
    expect((await api.call('DELETE', `/api/stacks/${id}`)).status).toBe(202)
    expect(await c.settle(id)).toBe('DELETE_COMPLETE')
    expect(fs.readFileSync(path.join(c.projectWorkspace(api.a.projectId), 'kept/by-param.txt'), 'utf8')).toBe('kept')
  })

  test("a resource's description is shown, in Kiln's listing and in Heat's resource show", async () => {
    const id = await create({ template: { heat_template_version: V, resources: { t: { type: 'OS::Heat::TestResource', description: 'the test one' } } } })
    const listed = await api.call('GET', `/api/stacks/${id}/resources`)
    expect(listed.body.resources[0].description).toBe('the test one')
    const stack = (await api.call('GET', `/api/stacks/${id}`)).body.stack
    const heat = await api.call('GET', `/v1/${api.a.projectId}/stacks/${stack.name}/${id}/resources/t`)
    expect(heat.body.resource.description).toBe('the test one')
  })

  test('an immutable parameter cannot be given another value by an update (Heat: ImmutableParameterModified)', async () => {
    const template = {
      heat_template_version: V,
      parameters: { region: { type: 'string', immutable: true, default: 'north' }, size: { type: 'number', default: 1 } },
      resources: { v: { type: 'OS::Heat::Value', properties: { value: { get_param: 'region' } } } },
    }
    const id = await create({ template })
    const r = await api.call('PATCH', `/api/stacks/${id}`, { body: { parameters: { region: 'south' } } })
    expect(r.status).toBe(400)
    expect(r.body.error.issues.map((i: { path: string }) => i.path)).toEqual(['parameters.region'])
    expect(r.text).toContain('immutable')
    // The same value, or another parameter, is fine.
    expect((await api.call('PATCH', `/api/stacks/${id}`, { body: { parameters: { region: 'north', size: 2 } } })).status).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    const stackName = (await api.call('GET', `/api/stacks/${id}`)).body.stack.name as string
    const heat = await api.call('PATCH', `/v1/${api.a.projectId}/stacks/${stackName}/${id}`, { body: { parameters: { region: 'east' } } })
    expect(heat.status).toBe(400)
    expect(heat.text).toContain('The following parameters are immutable and may not be updated: region')
  })

  test('clear_parameters on a PATCH: the stored values go and the defaults are back; refused on a PUT and for a name the template lacks', async () => {
    const template = {
      heat_template_version: V,
      parameters: { colour: { type: 'string', default: 'grey' }, shape: { type: 'string', default: 'round' } },
      resources: { v: { type: 'OS::Heat::Value', properties: { value: { list_join: ['-', [{ get_param: 'colour' }, { get_param: 'shape' }]] } } } },
    }
    const id = await create({ template, parameters: { colour: 'red', shape: 'square' } })
    const stackName = (await api.call('GET', `/api/stacks/${id}`)).body.stack.name as string
    const heat = `/v1/${api.a.projectId}/stacks/${stackName}/${id}`
    const r = await api.call('PATCH', heat, { body: { clear_parameters: ['colour'] } })
    expect(r.status, r.text).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect((await api.call('GET', `/api/stacks/${id}`)).body.stack.parameters).toEqual({ colour: 'grey', shape: 'square' })
    const value = await c.db.pool.query(`SELECT attributes->>'value' AS v FROM resource WHERE stack_id = $1`, [id])
    expect(value.rows[0].v).toBe('grey-square')

    const put = await api.call('PUT', heat, { body: { template, clear_parameters: ['shape'] } })
    expect(put.status).toBe(400)
    expect(put.text).toContain('clear_parameters')
    expect(await refused('PATCH', `/api/stacks/${id}`, { clearParameters: ['size'] })).toEqual(['clear_parameters.size'])
    expect(await refused('PUT', `/api/stacks/${id}`, { template, clearParameters: ['shape'] })).toEqual(['body.clearParameters'])
  })

  test('tags on an update replace the stack’s tags (Heat’s list or comma-separated string); without tags they are kept', async () => {
    const template = { heat_template_version: V, resources: { v: { type: 'OS::Heat::Value', properties: { value: 1 } } } }
    const r = await api.call('POST', '/api/stacks', { body: { name: 'tagged', template, tags: ['one'] } })
    const id = r.body.stack.id as string
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    expect((await api.call('PATCH', `/v1/${api.a.projectId}/stacks/tagged/${id}`, { body: { tags: 'two,three' } })).status).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect((await api.call('GET', `/api/stacks/${id}`)).body.stack.tags).toEqual(['two', 'three'])
    expect((await api.call('PATCH', `/api/stacks/${id}`, { body: { parameters: {}, force: true } })).status).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect((await api.call('GET', `/api/stacks/${id}`)).body.stack.tags).toEqual(['two', 'three'])
    expect((await api.call('PUT', `/api/stacks/${id}`, { body: { template, tags: ['four'] } })).status).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect((await api.call('GET', `/api/stacks/${id}`)).body.stack.tags).toEqual(['four'])
  })
})
