/**
 * Stacks: the project's list, one stack (its ETag names its template
 * version) and its template, and the operations: create, update (PUT: a new
 * template or `existing`; PATCH: the current one reused when none is sent),
 * delete, preview, cancel, rollback, check and drift.
 */
import { ValidationError } from '../../plan/errors'
import type { Principal } from '../../services/accounts'
import { actorOf, type ApiDeps } from '../deps'
import { HttpError, intParam, json, parse, type Router } from '../http'
import { CancelBody, CreateBody, UpdateBody } from '../schemas'
import { stackEtag } from '../versioning'
import { accepted, guardOf, previewBody, refused } from './shared'

export function stackRoutes(d: ApiDeps, router: Router<Principal>): void {
  router
    .add('GET', '/api/stacks', async (c) => {
      const q = c.url.searchParams
      const res = await d.reads.list(actorOf(c.principal), {
        limit: intParam(q.get('limit'), 50, 1, 500, 'limit'),
        ...(q.get('status') ? { status: q.get('status')! } : {}),
        ...(q.get('name') ? { name: q.get('name')! } : {}),
        ...(q.get('marker') ? { marker: q.get('marker')! } : {}),
      })
      return json(res)
    })
    .add('POST', '/api/stacks', async (c) => {
      const b = parse(CreateBody, await c.json())
      return accepted(await d.stacks.create(actorOf(c.principal), b), 201)
    })
    .add('GET', '/api/stacks/:stack', async (c) => {
      const outputs = c.url.searchParams.get('outputs')
      if (outputs !== null && outputs !== '0' && outputs !== '1') throw new HttpError(400, 'invalid_query', 'outputs must be 0 or 1')
      const actor = actorOf(c.principal)
      const stack = outputs === '0' ? await d.reads.showSummary(actor, c.params.stack!) : await d.reads.show(actor, c.params.stack!)
      // The ETag names the template version: an update sends it back as If-Match (or as `expect`).
      return json({ stack }, 200, stack.templateId ? { etag: stackEtag(stack.templateId) } : {})
    })
    .add('PUT', '/api/stacks/:stack', async (c) => {
      const { expect, force, ...b } = parse(UpdateBody, await c.json())
      if (!b.template && !b.existing) throw new ValidationError('give a template, or existing: true to reuse the current one (or use PATCH)')
      if (b.clearParameters && !b.existing) throw refused('clearParameters', 'it clears stored parameter values, which only an update that reuses them has (PATCH without a template, or existing: true)')
      return accepted(await d.stacks.update(actorOf(c.principal), c.params.stack!, b, guardOf(c.req, { expect, force })))
    })
    .add('PATCH', '/api/stacks/:stack', async (c) => {
      const { expect, force, ...b } = parse(UpdateBody, await c.json())
      if (b.clearParameters && b.template !== undefined && !b.existing) throw refused('clearParameters', 'it clears stored parameter values, which an update with a new template does not reuse')
      return accepted(await d.stacks.update(actorOf(c.principal), c.params.stack!, { ...b, existing: b.template === undefined }, guardOf(c.req, { expect, force })))
    })
    .add('DELETE', '/api/stacks/:stack', async (c) => accepted(await d.stacks.delete(actorOf(c.principal), c.params.stack!)))
    .add('POST', '/api/stacks/:stack/preview', async (c) => {
      const b = previewBody(await c.json())
      return json(await d.stacks.preview(actorOf(c.principal), c.params.stack!, { ...b, existing: b.existing ?? b.template === undefined }))
    })
    .add('POST', '/api/stacks/:stack/cancel', async (c) => accepted(await d.stacks.cancel(actorOf(c.principal), c.params.stack!, parse(CancelBody, await c.json()))))
    .add('POST', '/api/stacks/:stack/rollback', async (c) => accepted(await d.stacks.rollback(actorOf(c.principal), c.params.stack!)))
    .add('POST', '/api/stacks/:stack/check', async (c) => accepted(await d.stacks.check(actorOf(c.principal), c.params.stack!)))
    .add('POST', '/api/stacks/:stack/drift', async (c) => accepted(await d.stacks.drift(actorOf(c.principal), c.params.stack!)))
    .add('GET', '/api/stacks/:stack/template', async (c) => json(await d.reads.template(actorOf(c.principal), c.params.stack!)))
}
