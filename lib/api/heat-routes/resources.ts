/** Heat's stack resources (one per name: the newest row), one resource, and a resource signal. */
import type { Principal } from '../../services/accounts'
import { signalFrom, type SignalService } from '../../services/signals'
import { actorOf, type ApiDeps } from '../deps'
import { HttpError, json, parse, type Router } from '../http'
import { SignalBody } from '../schemas'
import { heatTime, identified, stackUrl, type Ctx } from './common'

type Row = Awaited<ReturnType<ApiDeps['reads']['resources']>>[number]

/** Heat lists one resource per name: the newest row that is not deleted. */
function current(rows: Row[]): Row[] {
  const byName = new Map<string, Row>()
  for (const r of rows) if (!byName.has(r.name) || byName.get(r.name)!.id < r.id) byName.set(r.name, r)
  return [...byName.values()].sort((a, b) => a.name.localeCompare(b.name))
}

function resourceBody(d: ApiDeps, c: Ctx, s: Record<string, unknown>, r: Row, all: Row[]) {
  const link = stackUrl(d, c, s)
  return {
    resource_name: r.name,
    logical_resource_id: r.name,
    physical_resource_id: r.physicalId ?? '',
    resource_type: r.type,
    resource_status: `${r.action}_${r.status}`,
    resource_status_reason: r.statusReason,
    creation_time: heatTime(r.createdAt),
    updated_time: heatTime(r.updatedAt),
    required_by: all.filter((x) => x.requires.includes(r.id)).map((x) => x.name),
    links: [
      { href: `${link}/resources/${encodeURIComponent(r.name)}`, rel: 'self' },
      { href: link, rel: 'stack' },
    ],
  }
}

export function resourceRoutes(d: ApiDeps, router: Router<Principal>, signals: SignalService): void {
  router
    .add('GET', '/v1/:project/stacks/:name/:id/resources', async (c) => {
      const s = await identified(d, c)
      const rows = current(await d.reads.resources(actorOf(c.principal), String(s.id)))
      return json({ resources: rows.map((r) => resourceBody(d, c, s, r, rows)) })
    })
    .add('GET', '/v1/:project/stacks/:name/:id/resources/:resource', async (c) => {
      const s = await identified(d, c)
      // A show of this one resource: attributes its type shows on request (a handle's curl_cli) appear.
      const rows = current(await d.reads.resources(actorOf(c.principal), String(s.id), { requested: c.params.resource! }))
      const r = rows.find((x) => x.name === c.params.resource)
      if (!r) throw new HttpError(404, 'not_found', `The Resource (${c.params.resource}) could not be found.`)
      return json({ resource: { ...resourceBody(d, c, s, r, rows), attributes: r.attributes, description: r.description, metadata: {} } })
    })
    // Heat's resource-signal: 200 with no body.
    .add('POST', '/v1/:project/stacks/:name/:id/resources/:resource/signal', async (c) => {
      const s = await identified(d, c)
      const body = parse(SignalBody, await c.json())
      await signals.signal(signalFrom(c.principal), String(s.id), c.params.resource!, body)
      return json(null)
    }, { signalToken: true })
}
