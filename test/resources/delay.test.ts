/**
 * OS::Heat::Delay with real workers: the actions it names wait at least
 * min_wait seconds, parked (a lower bound only: a busy machine can only make
 * them later), and what depends on it starts after; bad properties are 400s.
 */
import { describe, expect, test } from 'vitest'
import { useKilnEnv } from '../helpers/stack-env'

const { cluster: c, api } = useKilnEnv({ cluster: { workers: 2 } })

const delayed = (props: Record<string, unknown>) => ({
  heat_template_version: '2018-08-31',
  resources: {
    d: { type: 'OS::Heat::Delay', properties: props },
    after: { type: 'OS::Heat::TestResource', depends_on: ['d'], properties: { value: 'x' } },
  },
})

type Ev = { at: string; kind: string; resourceName: string | null; reason: string; action: string | null; status: string | null }
const events = async (id: string) => (await api.call('GET', `/api/stacks/${id}/events?limit=1000`)).body.events as Ev[]
const at = (evs: Ev[], pred: (e: Ev) => boolean) => {
  const e = evs.find(pred)
  expect(e).toBeDefined()
  return Date.parse(e!.at)
}

describe('OS::Heat::Delay', () => {
  test('a create waits min_wait seconds, parked, before what depends on it starts; a delete of CREATE only does not wait', async () => {
    const r = await api.call('POST', '/api/stacks', { body: { name: 'delayed', template: delayed({ min_wait: 1 }) } })
    expect(r.status, r.text).toBe(201)
    const id = r.body.stack.id as string
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    const evs = await events(id)
    expect(evs.some((e) => e.resourceName === 'd' && /^parked: delaying CREATE until /.test(e.reason))).toBe(true)
    const started = at(evs, (e) => e.kind === 'stack' && e.reason === 'Stack CREATE started')
    const afterStarted = at(evs, (e) => e.resourceName === 'after' && e.action === 'CREATE' && e.status === 'IN_PROGRESS')
    expect(afterStarted - started).toBeGreaterThanOrEqual(1000)

    expect((await api.call('DELETE', `/api/stacks/${id}`)).status).toBeLessThan(300)
    expect(await c.settle(id)).toBe('DELETE_COMPLETE')
    expect((await events(id)).some((e) => /delaying DELETE/.test(e.reason))).toBe(false)
  })

  test('actions: [DELETE] delays the delete instead', async () => {
    const id = (await api.call('POST', '/api/stacks', { body: { name: 'delayed-delete', template: delayed({ min_wait: 1, actions: ['DELETE'] }) } })).body.stack.id as string
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    expect((await events(id)).some((e) => /delaying CREATE/.test(e.reason))).toBe(false)
    expect((await api.call('DELETE', `/api/stacks/${id}`)).status).toBeLessThan(300)
    expect(await c.settle(id)).toBe('DELETE_COMPLETE')
    const evs = await events(id)
    const begun = at(evs, (e) => e.kind === 'stack' && e.reason === 'Stack DELETE started')
    const deleted = at(evs, (e) => e.resourceName === 'd' && e.action === 'DELETE' && e.status === 'COMPLETE')
    expect(deleted - begun).toBeGreaterThanOrEqual(1000)
  })

  test('a negative wait or an unknown action is refused, naming the property', async () => {
    for (const [props, place] of [[{ min_wait: -1 }, 'min_wait'], [{ actions: ['LATER'] }, 'actions']] as const) {
      const r = await api.call('POST', '/api/stacks', { body: { name: 'bad-delay', template: delayed(props) } })
      expect(r.status).toBe(400)
      expect(r.text).toContain(`resources.d.properties.${place}`)
    }
  })
})
