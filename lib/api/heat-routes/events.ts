/**
 * Heat's events of a stack or of one of its resources: only stack and
 * resource state changes are Heat events (node, lock and progress events are
 * Kiln's own); `resource_status`, `sort_dir`, `marker` and `limit` are
 * honoured.
 */
import type { Principal } from '../../services/accounts'
import { actorOf, type ApiDeps } from '../deps'
import { intParam, json, type Router } from '../http'
import { heatTime, identified, stackUrl, type Ctx } from './common'

type Event = Awaited<ReturnType<ApiDeps['reads']['events']>>['events'][number]

/** Events are read from the service a page of this many at a time. */
const PAGE = 1000

function toHeat(d: ApiDeps, c: Ctx, s: Record<string, unknown>, e: Event) {
  const isStack = e.kind === 'stack'
  const link = stackUrl(d, c, s)
  const name = isStack ? String(s.name) : (e.resourceName ?? '')
  return {
    id: String(e.seq),
    event_time: heatTime(e.at),
    resource_name: name,
    logical_resource_id: name,
    physical_resource_id: isStack ? String(s.id) : (e.physicalId ?? ''),
    resource_status: `${e.action ?? 'INIT'}_${e.status ?? 'COMPLETE'}`,
    resource_status_reason: e.reason,
    links: [
      { href: `${link}/resources/${encodeURIComponent(name)}/events/${e.seq}`, rel: 'self' },
      { href: `${link}/resources/${encodeURIComponent(name)}`, rel: 'resource' },
      { href: link, rel: 'stack' },
    ],
  }
}

async function heatEvents(d: ApiDeps, c: Ctx, s: Record<string, unknown>, resource: string | null) {
  const q = c.url.searchParams
  const desc = q.get('sort_dir') === 'desc'
  const marker = q.get('marker')
  const limit = intParam(q.get('limit'), 1000, 1, 10_000, 'limit')
  const all: ReturnType<typeof toHeat>[] = []
  let after = 0
  for (;;) {
    const page = await d.reads.events(actorOf(c.principal), String(s.id), { after, limit: PAGE, ...(resource ? { resource } : {}) })
    for (const e of page.events) if (e.kind === 'stack' || e.kind === 'resource') all.push(toHeat(d, c, s, e))
    if (page.events.length < PAGE) break
    after = page.events.at(-1)!.seq
  }
  let list = desc ? all.reverse() : all
  if (marker) {
    const i = list.findIndex((e) => e.id === marker)
    list = i >= 0 ? list.slice(i + 1) : list
  }
  const status = q.get('resource_status')
  if (status) list = list.filter((e) => e.resource_status.endsWith(status.toUpperCase()))
  return list.slice(0, limit)
}

export function eventRoutes(d: ApiDeps, router: Router<Principal>): void {
  router
    .add('GET', '/v1/:project/stacks/:name/:id/events', async (c) => {
      const s = await identified(d, c)
      return json({ events: await heatEvents(d, c, s, null) })
    })
    .add('GET', '/v1/:project/stacks/:name/:id/resources/:resource/events', async (c) => {
      const s = await identified(d, c)
      return json({ events: await heatEvents(d, c, s, c.params.resource!) })
    })
}
