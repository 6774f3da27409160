/**
 * Heat's Orchestration API v1 as Heat's own clients use it: Debian's
 * `openstack` (python3-openstackclient + python3-heatclient) drives create ->
 * update while IN_PROGRESS -> cancel -> delete, unchanged, with token auth
 * (`--os-auth-type admin_token`). Plus the API's wire format, checked directly:
 * field names, the name redirect, Heat's error body, and isolation.
 *
 * The CLI part needs the `openstack` command: CI installs it and sets
 * KILN_REQUIRE_HEATCLIENT=1 so that its absence fails the run.
 */
import { execFile, execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { env } from '../../lib/env'
import { useKilnEnv } from '../helpers/stack-env'

const run = promisify(execFile)
const hasOpenstack = (() => {
  try {
    execFileSync('openstack', ['--version'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
})()

const { cluster: c, api } = useKilnEnv({ cluster: { workers: 2, leaseMs: 2000 } })
let dir: string

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-heat-'))
})
afterAll(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true })
})

const template = (value: string, wait: number) => `heat_template_version: 2018-08-31
resources:
  a:
    type: OS::Heat::TestResource
    properties:
      value: ${value}
      wait_secs: ${wait}
  b:
    type: OS::Heat::TestResource
    properties:
      value: { get_attr: [a, output] }
      wait_secs: ${wait}
outputs:
  result:
    value: { get_attr: [b, output] }
`

/** `template(value)` with a gate in front of `a`: a wait condition that only a signal to gate_handle releases. */
const gatedTemplate = (value: string) => `heat_template_version: 2018-08-31
resources:
  gate_handle:
    type: OS::Heat::WaitConditionHandle
  gate:
    type: OS::Heat::WaitCondition
    properties:
      handle: { get_resource: gate_handle }
      timeout: 3600
  a:
    type: OS::Heat::TestResource
    depends_on: gate
    properties:
      value: ${value}
  b:
    type: OS::Heat::TestResource
    properties:
      value: { get_attr: [a, output] }
outputs:
  result:
    value: { get_attr: [b, output] }
`

describe('Heat API v1 wire format', () => {
  test('create -> 201 with a self link; /stacks/{name} redirects; show has Heat field names', async () => {
    const p = `/v1/${api.a.projectId}`
    const created = await api.call('POST', `${p}/stacks`, { body: { stack_name: 'wire', template: { heat_template_version: '2018-08-31', resources: { v: { type: 'OS::Heat::Value', properties: { value: 42 } } }, outputs: { o: { value: { get_attr: ['v', 'value'] } } } } } })
    expect(created.status).toBe(201)
    const id = created.body.stack.id
    expect(created.body.stack.links[0]).toEqual({ href: `${api.url}${p}/stacks/wire/${id}`, rel: 'self' })
    await c.settle(id)
    const redirect = await api.call('GET', `${p}/stacks/wire`)
    expect(redirect.status).toBe(302)
    expect(redirect.headers.get('location')).toBe(`${api.url}${p}/stacks/wire/${id}`)
    const shown = await api.call('GET', `${p}/stacks/wire/${id}`)
    expect(shown.body.stack).toMatchObject({ id, stack_name: 'wire', stack_status: 'CREATE_COMPLETE', disable_rollback: true, capabilities: [] })
    expect(shown.body.stack.creation_time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)
    expect(shown.body.stack.outputs).toEqual([{ output_key: 'o', output_value: 42, description: 'No description given' }])
    expect(shown.body.stack.parameters['OS::stack_name']).toBe('wire')
    const events = await api.call('GET', `${p}/stacks/wire/${id}/events`)
    const stackEvents = events.body.events.filter((e: { resource_name: string }) => e.resource_name === 'wire')
    expect(stackEvents.map((e: { resource_status: string }) => e.resource_status)).toEqual(['CREATE_IN_PROGRESS', 'CREATE_COMPLETE'])
    expect(stackEvents[0].physical_resource_id).toBe(id)
    const after = await api.call('GET', `${p}/stacks/wire/${id}/events?marker=${events.body.events[0].id}`)
    expect(after.body.events).toHaveLength(events.body.events.length - 1)
    const resources = await api.call('GET', `${p}/stacks/wire/resources`)
    expect(resources.status).toBe(302)
    const rs = await api.call('GET', `${p}/stacks/wire/${id}/resources`)
    expect(rs.body.resources[0]).toMatchObject({ resource_name: 'v', resource_type: 'OS::Heat::Value', resource_status: 'CREATE_COMPLETE', required_by: [] })
    expect((await api.call('GET', `${p}/stacks/wire/${id}/resources/v`)).body.resource.attributes).toEqual({ value: 42 })
    expect((await api.call('GET', `${p}/stacks/wire/${id}/template`)).body.resources.v.type).toBe('OS::Heat::Value')
    expect((await api.call('GET', `${p}/stacks/wire/${id}/outputs`)).body.outputs).toEqual([{ output_key: 'o', description: 'No description given' }])
    expect((await api.call('GET', `${p}/stacks/wire/${id}/outputs/o`)).body.output.output_value).toBe(42)
    const preview = await api.call('PUT', `${p}/stacks/wire/${id}/preview`, { body: { template: { heat_template_version: '2018-08-31', resources: { v: { type: 'OS::Heat::Value', properties: { value: 43 } }, w: { type: 'OS::Heat::None' } } } } })
    expect(preview.body.resource_changes.updated.map((r: { resource_name: string }) => r.resource_name)).toEqual(['v'])
    expect(preview.body.resource_changes.added.map((r: { resource_name: string }) => r.resource_name)).toEqual(['w'])
    const validate = await api.call('POST', `${p}/validate`, { body: { template: { heat_template_version: '2018-08-31', parameters: { n: { type: 'number', default: 1 }, pw: { type: 'string', hidden: true, default: 'x' } } } } })
    expect(validate.body.Parameters.n).toMatchObject({ Type: 'Number', Default: 1, NoEcho: 'false' })
    expect(validate.body.Parameters.pw).toMatchObject({ Type: 'String', Default: '******', NoEcho: 'true' })
    expect((await api.call('GET', `${p}/resource_types`)).body.resource_types).toContain('OS::Heat::TestResource')
    expect((await api.call('POST', `${p}/stacks/wire/${id}/actions`, { body: { suspend: null } })).status).toBe(400)
    // every stack route with project B's token on B's URL: A's stack does not exist there
    for (const [m, sub] of [['GET', ''], ['GET', '/resources'], ['GET', '/resources/v'], ['GET', '/events'], ['GET', '/template'], ['GET', '/outputs'], ['GET', '/outputs/o'], ['PUT', ''], ['PATCH', ''], ['PUT', '/preview'], ['POST', '/actions'], ['DELETE', '']] as const) {
      const r = await api.call(m, `/v1/${api.b.projectId}/stacks/wire/${id}${sub}`, { token: api.b.token, ...(m === 'GET' || m === 'DELETE' ? {} : { body: m === 'POST' ? { cancel_update: null } : { template: { heat_template_version: '2018-08-31' } } }) })
      expect(r.status, `${m} ${sub}`).toBe(404)
    }
  })

  test("errors have Heat's body; another project's token is refused or sees nothing", async () => {
    const p = `/v1/${api.a.projectId}`
    const missing = await api.call('GET', `${p}/stacks/nope/00000000-0000-4000-8000-000000000000`)
    expect(missing.status).toBe(404)
    expect(missing.body).toMatchObject({ code: 404, title: 'Not Found', error: { type: 'EntityNotFound' } })
    const bad = await api.call('POST', `${p}/stacks`, { body: { stack_name: 'bad', template: { heat_template_version: '2018-08-31', resources: { x: { type: 'No::Such' } } } } })
    expect(bad.status).toBe(400)
    expect(bad.body.error.message).toContain('resources.x.type')
    expect((await api.call('GET', `${p}/stacks`, { token: null })).status).toBe(401)
    // B's token on A's project URL: forbidden; on its own URL, A's stack does not exist.
    expect((await api.call('GET', `${p}/stacks`, { token: api.b.token })).status).toBe(403)
    const mine = await api.call('GET', `${p}/stacks`)
    const id = mine.body.stacks[0].id
    expect((await api.call('GET', `/v1/${api.b.projectId}/stacks/wire/${id}`, { token: api.b.token })).status).toBe(404)
    expect((await api.call('GET', `/v1/${api.b.projectId}/stacks/wire`, { token: api.b.token })).status).toBe(404)
    expect((await api.call('DELETE', `/v1/${api.b.projectId}/stacks/wire`, { token: api.b.token })).status).toBe(404)
    expect((await api.call('GET', `/v1/${api.b.projectId}/stacks`, { token: api.b.token })).body.stacks).toEqual([])
  })
})

describe.runIf(hasOpenstack || env().KILN_REQUIRE_HEATCLIENT)('openstack CLI (python3-heatclient), unchanged', () => {
  const openstack = async (...args: string[]) => {
    const res = await run('openstack', ['--os-auth-type', 'admin_token', '--os-endpoint', `${api.url}/v1/${api.a.projectId}`, '--os-token', api.a.token, ...args], { encoding: 'utf8', timeout: 90_000 })
    return res.stdout
  }
  const status = async (name: string) => JSON.parse(await openstack('stack', 'show', name, '-f', 'json')).stack_status as string

  test('create -> update while IN_PROGRESS -> cancel -> delete', async () => {
    expect(hasOpenstack, 'the openstack command is required here (apt-get install python3-openstackclient python3-heatclient)').toBe(true)
    const t1 = path.join(dir, 'one.yaml')
    const t2 = path.join(dir, 'two.yaml')
    const t3 = path.join(dir, 'three.yaml')
    fs.writeFileSync(t1, template('one', 0))
    // The updates wait at a gate (a wait condition) until the test signals it, so they are still
    // running when the next command arrives, however slow the machine: no race with the clock.
    fs.writeFileSync(t2, gatedTemplate('two'))
    fs.writeFileSync(t3, gatedTemplate('three'))

    const created = await openstack('stack', 'create', '-t', t1, 'cli', '--wait')
    expect(created).toContain('CREATE_COMPLETE')
    expect(JSON.parse(await openstack('stack', 'output', 'show', 'cli', 'result', '-f', 'json')).output_value).toBe('one')

    await openstack('stack', 'update', '-t', t2, 'cli')
    expect(await status('cli')).toBe('UPDATE_IN_PROGRESS')
    // Heat's convergence: a second update while the first runs is accepted and supersedes it.
    await openstack('stack', 'update', '-t', t3, 'cli')
    expect(await status('cli')).toBe('UPDATE_IN_PROGRESS')
    await openstack('stack', 'cancel', 'cli')
    expect(await status('cli')).toBe('ROLLBACK_IN_PROGRESS')
    // The gate's row is still held by the first update's worker; the signal lets it go, and the
    // rollback, which was waiting for that row, deletes the gate and puts a and b back.
    await openstack('stack', 'resource', 'signal', 'cli', 'gate_handle', '--data', '{"status": "SUCCESS", "reason": "released by the test"}')
    await c.waitFor(async () => !(await status('cli')).endsWith('IN_PROGRESS'), 60_000, 'the rollback to finish')
    expect(await status('cli')).toBe('ROLLBACK_COMPLETE')
    expect(JSON.parse(await openstack('stack', 'output', 'show', 'cli', 'result', '-f', 'json')).output_value).toBe('one')

    const resources = JSON.parse(await openstack('stack', 'resource', 'list', 'cli', '-f', 'json')) as { resource_name: string; resource_status: string }[]
    expect(resources.map((r) => r.resource_name).sort()).toEqual(['a', 'b'])
    const events = JSON.parse(await openstack('stack', 'event', 'list', 'cli', '-f', 'json')) as { resource_status: string }[]
    expect(events.map((e) => e.resource_status)).toContain('ROLLBACK_COMPLETE')

    await openstack('stack', 'delete', 'cli', '--yes', '--wait')
    const left = JSON.parse(await openstack('stack', 'list', '-f', 'json')) as { 'Stack Name': string }[]
    expect(left.map((s) => s['Stack Name'])).not.toContain('cli')
    expect(left.map((s) => s['Stack Name'])).toContain('wire')
  }, 120_000)

  test("a handle's curl_cli: shown by resource show (it names the resource), masked in the list and the events; its token signals the wait", async () => {
    const t = path.join(dir, 'wait.yaml')
    fs.writeFileSync(t, `heat_template_version: 2018-08-31
resources:
  handle: {type: OS::Heat::WaitConditionHandle}
  wait: {type: OS::Heat::WaitCondition, properties: {handle: {get_resource: handle}, timeout: 600}}
`)
    await openstack('stack', 'create', '-t', t, 'curlwait')
    // The wait holds the stack until the signal below: the handle is created, the wait waits.
    const show = async () => JSON.parse(await openstack('stack', 'resource', 'show', 'curlwait', 'handle', '-f', 'json')) as { resource_status: string; attributes: Record<string, string> }
    await c.waitFor(async () => (await show().catch(() => null))?.resource_status === 'CREATE_COMPLETE', 60_000, 'the handle to be created')
    const attrs = (await show()).attributes
    expect(attrs.curl_cli).toMatch(/^curl -i -X POST -H 'X-Auth-Token: kiln_sig_[^']+' .*\/resources\/handle\/signal$/)
    const token = /X-Auth-Token: ([^']+)'/.exec(attrs.curl_cli!)![1]!
    expect(attrs.token).toBe(token)
    const id = JSON.parse(await openstack('stack', 'show', 'curlwait', '-f', 'json')).id as string
    // Everywhere else the token stays masked: the resource list (Kiln's shows attributes), the events.
    expect(JSON.stringify((await api.call('GET', `/api/stacks/${id}/resources`)).body)).not.toContain(token)
    expect(await openstack('stack', 'event', 'list', 'curlwait', '-f', 'json')).not.toContain(token)
    // What the pasted command does: a POST with the handle's own token.
    const signalled = await fetch(`${api.url}/v1/${api.a.projectId}/stacks/curlwait/${id}/resources/handle/signal`, { method: 'POST', headers: { 'x-auth-token': token, 'content-type': 'application/json' }, body: JSON.stringify({ status: 'SUCCESS' }) })
    expect(signalled.status).toBe(200)
    await c.waitFor(async () => JSON.parse(await openstack('stack', 'show', 'curlwait', '-f', 'json')).stack_status !== 'CREATE_IN_PROGRESS', 60_000, 'the wait to end')
    expect(JSON.parse(await openstack('stack', 'show', 'curlwait', '-f', 'json')).stack_status).toBe('CREATE_COMPLETE')
  }, 120_000)

  test('a sensitive output: masked by stack show, shown by output show (it names the output)', async () => {
    const t = path.join(dir, 'sensitive.yaml')
    fs.writeFileSync(t, `heat_template_version: 2018-08-31
parameters:
  pw: { type: string, hidden: true }
resources:
  v: { type: OS::Heat::Value, properties: { value: { str_replace: { template: 'user:PW@db', params: { PW: { get_param: pw } } } } } }
outputs:
  dsn: { value: { get_attr: [v, value] } }
`)
    expect(await openstack('stack', 'create', '-t', t, '--parameter', 'pw=os-s3cret-pass', 'sens', '--wait')).toContain('CREATE_COMPLETE')
    const shown = await openstack('stack', 'show', 'sens', '-f', 'json')
    expect(shown).not.toContain('os-s3cret-pass')
    expect(JSON.parse(shown).outputs).toEqual([expect.objectContaining({ output_key: 'dsn', output_value: '******' })])
    expect(await openstack('stack', 'output', 'list', 'sens', '-f', 'json')).not.toContain('os-s3cret-pass')
    expect(JSON.parse(await openstack('stack', 'output', 'show', 'sens', 'dsn', '-f', 'json')).output_value).toBe('user:os-s3cret-pass@db')
    await openstack('stack', 'delete', 'sens', '--yes', '--wait')
  }, 120_000)
})
