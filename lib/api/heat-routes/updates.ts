/**
 * Heat's changes to a stack: update (PUT: a new template; PATCH: the existing
 * one reused when none is sent; also while IN_PROGRESS), delete, the
 * preview of an update, and the stack actions (cancel, check).
 */
import type { PreviewItem } from '../../services/preview'
import type { Principal } from '../../services/accounts'
import { actorOf, type ApiDeps } from '../deps'
import { json, type Router } from '../http'
import { body, fail, identified } from './common'
import { submission, updateOnly } from './requests'

export function updateRoutes(d: ApiDeps, router: Router<Principal>): void {
  router
    .add('PUT', ['/v1/:project/stacks/:name/:id', '/v1/:project/stacks/:name'], async (c) => {
      const s = await identified(d, c)
      const raw = await body(c)
      const b = submission(raw)
      if (b.template === undefined) fail('template is required (use PATCH to reuse the existing template)')
      await d.stacks.update(actorOf(c.principal), String(s.id), { ...b, ...updateOnly(raw, { preview: false, reusesParameters: false }) })
      return new Response(null, { status: 202 })
    })
    .add('PATCH', ['/v1/:project/stacks/:name/:id', '/v1/:project/stacks/:name'], async (c) => {
      const s = await identified(d, c)
      const raw = await body(c)
      const b = submission(raw)
      await d.stacks.update(actorOf(c.principal), String(s.id), { ...b, ...updateOnly(raw, { preview: false, reusesParameters: b.template === undefined }), existing: b.template === undefined })
      return new Response(null, { status: 202 })
    })
    .add('DELETE', '/v1/:project/stacks/:name/:id', async (c) => {
      const s = await identified(d, c)
      await d.stacks.delete(actorOf(c.principal), String(s.id))
      return new Response(null, { status: 204 })
    })
    .add('PUT', ['/v1/:project/stacks/:name/:id/preview', '/v1/:project/stacks/:name/preview'], async (c) => {
      const s = await identified(d, c)
      const raw = await body(c)
      const b = submission(raw)
      const p = await d.stacks.preview(actorOf(c.principal), String(s.id), { ...b, ...updateOnly(raw, { preview: true, reusesParameters: b.template === undefined }), existing: b.template === undefined })
      const group = (a: PreviewItem['action']) => p.items.filter((i) => i.action === a).map((i) => ({ resource_name: i.name, resource_type: i.type, resource_action: 'INIT', resource_status: 'COMPLETE', resource_identity: {}, stack_name: s.name, stack_identity: { stack_id: s.id, stack_name: s.name, tenant: c.principal.projectId, path: '' } }))
      return json({ resource_changes: { added: group('create'), updated: group('update'), replaced: group('replace'), deleted: group('delete'), unchanged: group('unchanged') } })
    })
    .add('POST', ['/v1/:project/stacks/:name/:id/actions', '/v1/:project/stacks/:name/actions'], async (c) => {
      const s = await identified(d, c)
      const b = await body(c)
      const keys = Object.keys(b)
      if (keys.length !== 1) fail('an action body has exactly one key: cancel_update, cancel_without_rollback, check, suspend or resume')
      const actor = actorOf(c.principal)
      switch (keys[0]) {
        case 'cancel_update':
          await d.stacks.cancel(actor, String(s.id), { rollback: true })
          break
        case 'cancel_without_rollback':
          await d.stacks.cancel(actor, String(s.id), { rollback: false })
          break
        case 'check':
          await d.stacks.check(actor, String(s.id))
          break
        default:
          fail(`action ${keys[0]} is not supported by Kiln`)
      }
      return new Response(null, { status: 200 })
    })
}
