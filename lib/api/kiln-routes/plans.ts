/**
 * Changes worked out before they are made: saved plans of a stack (computed,
 * listed, shown, discarded, applied once), and imports that adopt existing
 * objects (external_id) into a new or existing stack, with their preview.
 */
import { z } from 'zod'
import type { Principal } from '../../services/accounts'
import { actorOf, type ApiDeps } from '../deps'
import { json, parse, tooManyRequests, type Router } from '../http'
import { ImportBody } from '../schemas'
import { accepted, previewBody } from './shared'

export function planRoutes(d: ApiDeps, router: Router<Principal>): void {
  router
    .add('POST', '/api/stacks/:stack/plans', async (c) => {
      const b = previewBody(await c.json())
      return json({ plan: await d.plans.create(actorOf(c.principal), c.params.stack!, { ...b, existing: b.existing ?? b.template === undefined }) }, 201)
    })
    .add('GET', '/api/stacks/:stack/plans', async (c) => json({ plans: await d.plans.list(actorOf(c.principal), c.params.stack!) }))
    .add('GET', '/api/stacks/:stack/plans/:plan', async (c) => json({ plan: await d.plans.show(actorOf(c.principal), c.params.stack!, c.params.plan!) }))
    .add('DELETE', '/api/stacks/:stack/plans/:plan', async (c) => {
      await d.plans.discard(actorOf(c.principal), c.params.stack!, c.params.plan!)
      return json(null, 204)
    })
    .add('POST', '/api/stacks/:stack/plans/:plan/apply', async (c) => {
      parse(z.object({}).strict(), await c.json())
      return accepted(await d.plans.apply(actorOf(c.principal), c.params.stack!, c.params.plan!))
    })
    .add('GET', '/api/plans/:plan', async (c) => json({ plan: await d.plans.byId(actorOf(c.principal), c.params.plan!) }))
}

export function importRoutes(d: ApiDeps, router: Router<Principal>): void {
  router
    .add('POST', '/api/import/preview', async (c) => {
      // Counted before anything is read or looked at: a refused preview costs the server nothing more.
      const wait = await d.importPreviews.take(c.principal.projectId)
      if (wait) throw tooManyRequests(`too many import previews for this project (KILN_IMPORT_PREVIEWS_PER_MINUTE); retry in ${wait} s`, wait)
      return json(await d.imports.preview(actorOf(c.principal), parse(ImportBody, await c.json())))
    })
    .add('POST', '/api/import', async (c) => {
      const res = await d.imports.run(actorOf(c.principal), parse(ImportBody, await c.json()))
      return json({ stack: res.stack, action: res.action, traversalId: res.traversalId, superseded: res.superseded, created: res.created }, res.created ? 201 : 202)
    })
}
