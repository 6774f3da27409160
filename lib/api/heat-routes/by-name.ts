/**
 * `/stacks/{name or id}[/...]`: Heat redirects to the canonical
 * `/stacks/{name}/{id}[/...]`. Registered before the other stack routes, so
 * `events` is never taken for an id.
 */
import type { Principal } from '../../services/accounts'
import { actorOf, type ApiDeps } from '../deps'
import type { Router } from '../http'
import { redirect, requireProject } from './common'

export function byNameRoutes(d: ApiDeps, router: Router<Principal>): void {
  router
    .add('GET', '/v1/:project/stacks/:name', (c) => redirect(d, c, ''))
    .add('GET', '/v1/:project/stacks/:name/resources', (c) => redirect(d, c, '/resources'))
    .add('GET', '/v1/:project/stacks/:name/events', (c) => redirect(d, c, '/events'))
    .add('GET', '/v1/:project/stacks/:name/template', (c) => redirect(d, c, '/template'))
    .add('GET', '/v1/:project/stacks/:name/outputs', (c) => redirect(d, c, '/outputs'))
    // Deleting by name or id directly: a redirected DELETE may come back as a GET from some HTTP clients.
    .add('DELETE', '/v1/:project/stacks/:name', async (c) => {
      requireProject(c)
      await d.stacks.delete(actorOf(c.principal), c.params.name!)
      return new Response(null, { status: 204 })
    })
    .add('GET', '/v1/:project/stacks/:name/resources/:resource', (c) => redirect(d, c, `/resources/${encodeURIComponent(c.params.resource!)}`))
    .add('GET', '/v1/:project/stacks/:name/resources/:resource/events', (c) => redirect(d, c, `/resources/${encodeURIComponent(c.params.resource!)}/events`))
    .add('GET', '/v1/:project/stacks/:name/outputs/:key', (c) => redirect(d, c, `/outputs/${encodeURIComponent(c.params.key!)}`))
}
