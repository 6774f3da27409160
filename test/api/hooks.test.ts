/**
 * Heat's hooks: an environment's `resource_registry.resources.<name>.hooks`
 * stops a traversal before it acts on that resource, parked (no worker slot),
 * until a signal with `unset_hook` clears it; through Kiln's API, Heat's, and
 * Heat's own client (`openstack stack create --pre-create`, `stack hook poll`,
 * `stack hook clear`). A hook holds the traversal for as long as the test
 * needs: every wait below is for a state the test then releases.
 */
import { execFile, execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { childEnv, env } from '../../lib/env'
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

const { cluster: c, api } = useKilnEnv({ cluster: { workers: 2 } })
let dir: string
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-hooks-'))
})
afterAll(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true })
})

const chain = (value = 'one') => `heat_template_version: 2018-08-31
resources:
  a: {type: OS::Heat::TestResource, properties: {value: ${value}}}
  b: {type: OS::Heat::TestResource, properties: {value: {get_attr: [a, output]}}}
  c: {type: OS::Heat::TestResource, properties: {value: {get_attr: [b, output]}}}
`

type Ev = { kind: string; resourceName: string | null; reason: string; action: string | null; status: string | null }
const events = async (id: string) => (await api.call('GET', `/api/stacks/${id}/events?limit=1000`)).body.events as Ev[]
const pausedAt = async (id: string, name: string, reason: string) => (await events(id)).some((e) => e.kind === 'resource' && e.resourceName === name && e.reason === reason)
const signal = (id: string, name: string, body: unknown) => api.call('POST', `/api/stacks/${id}/resources/${name}/signal`, { body })

describe('hooks through the API', () => {
  test('a pre-create hook stops the chain before b, parked; clearing it lets the create finish', async () => {
    const environment = { resource_registry: { resources: { 'b*': { hooks: 'pre-create' } } } }
    const created = await api.call('POST', '/api/stacks', { body: { name: 'hooked', template: chain(), environment } })
    expect(created.status).toBe(201)
    const id = created.body.stack.id as string
    await c.waitFor(() => pausedAt(id, 'b', 'CREATE paused until Hook pre-create is cleared'), 60_000, 'b to reach its pre-create hook')

    const rows = await c.rows(id)
    const row = (n: string) => rows.find((r) => r.name === n)
    expect(row('a')).toMatchObject({ action: 'CREATE', status: 'COMPLETE' })
    expect(row('b')!.status).not.toBe('COMPLETE')
    expect(row('c')?.action ?? 'INIT').toBe('INIT')
    // Parked: no worker holds b's job while it waits.
    const held = await c.db.pool.query(`SELECT count(*)::int AS n FROM job WHERE stack_id = $1 AND locked_by IS NOT NULL`, [id])
    expect(held.rows[0].n).toBe(0)

    // Only a hook that is pending can be cleared, and only a hook Kiln knows.
    const notThere = await signal(id, 'a', { unset_hook: 'pre-create' })
    expect(notThere.status).toBe(400)
    expect(notThere.body.error.message).toContain('"pre-create" hook is not defined on a')
    const wrong = await signal(id, 'b', { unset_hook: 'pre-launch' })
    expect(wrong.status).toBe(400)
    expect(wrong.body.error.message).toContain('Invalid hook type "pre-launch"')
    const mixed = await signal(id, 'b', { unset_hook: 'pre-create', status: 'SUCCESS' })
    expect(mixed.status).toBe(400)
    expect((await c.db.pool.query(`SELECT action || '_' || status AS s FROM stack WHERE id = $1`, [id])).rows[0].s).toBe('CREATE_IN_PROGRESS')

    expect((await signal(id, 'b', { unset_hook: 'pre-create' })).status).toBeLessThan(300)
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    expect(await pausedAt(id, 'b', 'Hook pre-create is cleared')).toBe(true)
    // Cleared once: a second clear finds nothing waiting.
    expect((await signal(id, 'b', { unset_hook: 'pre-create' })).status).toBe(400)
  }, 120_000)

  test('pre-update stops an in-place update and pre-delete a delete, each until cleared', async () => {
    const environment = { resource_registry: { resources: { c: { hooks: ['pre-update', 'pre-delete'] } } } }
    const created = await api.call('POST', '/api/stacks', { body: { name: 'hooked2', template: chain(), environment } })
    const id = created.body.stack.id as string
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')

    const updated = await api.call('PUT', `/api/stacks/${id}`, { body: { template: chain('two'), environment } })
    expect(updated.status).toBeLessThan(300)
    await c.waitFor(() => pausedAt(id, 'c', 'UPDATE paused until Hook pre-update is cleared'), 60_000, 'c to reach its pre-update hook')
    expect((await c.rows(id)).find((r) => r.name === 'b')).toMatchObject({ action: 'UPDATE', status: 'COMPLETE' })
    expect((await signal(id, 'c', { unset_hook: 'pre-update' })).status).toBeLessThan(300)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')

    expect((await api.call('DELETE', `/api/stacks/${id}`)).status).toBeLessThan(300)
    await c.waitFor(() => pausedAt(id, 'c', 'DELETE paused until Hook pre-delete is cleared'), 60_000, 'c to reach its pre-delete hook')
    const c3 = (await c.rows(id)).find((r) => r.name === 'c')!
    expect(`${c3.action}_${c3.status}`).not.toBe('DELETE_COMPLETE')
    expect((await signal(id, 'c', { unset_hook: 'pre-delete' })).status).toBeLessThan(300)
    expect(await c.settle(id)).toBe('DELETE_COMPLETE')
  }, 120_000)

  test('kiln stack hook lists the hooks the operation waits at and clears them', async () => {
    const kiln = async (...args: string[]) => (await run(process.execPath, ['bin/kiln.mjs', ...args], { env: childEnv({ KILN_URL: api.url, KILN_TOKEN: api.a.token }), timeout: 60_000 })).stdout
    const environment = { resource_registry: { resources: { '[ab]': { hooks: 'pre-create' } } } }
    const id = (await api.call('POST', '/api/stacks', { body: { name: 'clihook', template: chain(), environment } })).body.stack.id as string
    await c.waitFor(() => pausedAt(id, 'a', 'CREATE paused until Hook pre-create is cleared'), 60_000, 'a to reach its pre-create hook')
    expect((JSON.parse(await kiln('stack', 'hook', 'clihook', '--json')) as { resource: string; hook: string }[]).map((h) => [h.resource, h.hook])).toEqual([['a', 'pre-create']])
    expect(await kiln('stack', 'hook', 'clihook', 'a')).toContain('pre-create hook of a cleared')
    await c.waitFor(() => pausedAt(id, 'b', 'CREATE paused until Hook pre-create is cleared'), 60_000, 'b to reach its pre-create hook')
    expect((JSON.parse(await kiln('stack', 'hook', 'clihook', '--json')) as { resource: string }[]).map((h) => h.resource)).toEqual(['b'])
    await kiln('stack', 'hook', 'clihook', 'b', '--type', 'pre-create')
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    expect(await kiln('stack', 'hook', 'clihook')).toContain('no resource waits at a hook')
  }, 120_000)

  test('hooks Kiln cannot honour are refused, naming the place', async () => {
    const refused = async (resources: unknown, text: string) => {
      const r = await api.call('POST', '/api/stacks', { body: { name: 'refused', template: chain(), environment: { resource_registry: { resources } } } })
      expect(r.status).toBe(400)
      expect(JSON.stringify(r.body)).toContain(text)
    }
    await refused({ b: { hooks: 'post-create' } }, 'the post-create hook is not supported')
    await refused({ b: { hooks: ['pre-create', 'pre-launch'] } }, '\\"pre-launch\\" is not a hook')
    await refused({ nested: { inner: { hooks: 'pre-create' } } }, 'hooks in nested stacks are not supported')
    await refused({ b: { 'OS::Heat::TestResource': 'OS::Heat::None' } }, 'per-resource type overrides are not supported')
  })
})

describe.runIf(hasOpenstack || env().KILN_REQUIRE_HEATCLIENT)('hooks with openstack (python3-heatclient), unchanged', () => {
  const openstack = async (...args: string[]) => {
    const res = await run('openstack', ['--os-auth-type', 'admin_token', '--os-endpoint', `${api.url}/v1/${api.a.projectId}`, '--os-token', api.a.token, ...args], { encoding: 'utf8', timeout: 90_000 })
    return res.stdout
  }

  test('stack create --pre-create, stack hook poll, stack hook clear', async () => {
    expect(hasOpenstack, 'the openstack command is required here (apt-get install python3-openstackclient python3-heatclient)').toBe(true)
    const t = path.join(dir, 'chain.yaml')
    fs.writeFileSync(t, chain())
    await openstack('stack', 'create', '-t', t, '--pre-create', 'b', 'oshook')
    const poll = async () => JSON.parse(await openstack('stack', 'hook', 'poll', 'oshook', '-f', 'json')) as { 'Resource Name': string; 'Resource Status Reason': string }[]
    await c.waitFor(async () => (await poll()).length > 0, 60_000, 'hook poll to list b')
    expect((await poll()).map((h) => [h['Resource Name'], h['Resource Status Reason']])).toEqual([['b', 'CREATE paused until Hook pre-create is cleared']])

    await openstack('stack', 'hook', 'clear', 'oshook', 'b')
    await c.waitFor(async () => JSON.parse(await openstack('stack', 'show', 'oshook', '-f', 'json')).stack_status !== 'CREATE_IN_PROGRESS', 60_000, 'the create to end')
    expect(JSON.parse(await openstack('stack', 'show', 'oshook', '-f', 'json')).stack_status).toBe('CREATE_COMPLETE')
  }, 120_000)
})
