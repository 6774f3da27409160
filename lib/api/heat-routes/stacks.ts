/** Heat's stack list, create and show, with Heat's stack body. */
import type { Principal } from '../../services/accounts'
import { actorOf, type ApiDeps } from '../deps'
import { HttpError, intParam, json, type Router } from '../http'
import { body, fail, heatTime, identified, requireProject, stackUrl, type Ctx } from './common'
import { submission } from './requests'

type StackShown = Awaited<ReturnType<ApiDeps['reads']['show']>> | Awaited<ReturnType<ApiDeps['reads']['list']>>['stacks'][number]

/** A stack as Heat shows it: `<ACTION>_<STATUS>`, its link. */
function stackBody(d: ApiDeps, c: Ctx, s: StackShown) {
  return {
    id: s.id,
    stack_name: s.name,
    description: 'description' in s ? s.description : '',
    creation_time: heatTime(s.createdAt),
    updated_time: heatTime(s.updatedAt),
    deletion_time: 'deletedAt' in s ? heatTime(s.deletedAt) : null,
    stack_status: `${s.action}_${s.status}`,
    stack_status_reason: s.statusReason,
    stack_owner: null,
    parent: null,
    stack_user_project_id: c.principal.projectId,
    project: c.principal.projectId,
    tags: s.tags.length ? s.tags : null,
    links: [{ href: stackUrl(d, c, s), rel: 'self' }],
  }
}

export function stackRoutes(d: ApiDeps, router: Router<Principal>): void {
  router
    .add('GET', '/v1/:project/stacks', async (c) => {
      requireProject(c)
      const q = c.url.searchParams
      let marker: string | undefined
      const m = q.get('marker')
      if (m) {
        const rows = await d.reads.list(actorOf(c.principal), { limit: 500 })
        const at = rows.stacks.find((s) => s.id === m)
        if (!at) throw new HttpError(404, 'not_found', `The Stack (${m}) could not be found.`)
        marker = Buffer.from(`${at.createdAt}|${at.id}`).toString('base64url')
      }
      const res = await d.reads.list(actorOf(c.principal), {
        limit: intParam(q.get('limit'), 500, 1, 500, 'limit'),
        ...(q.get('status') ? { status: q.get('status')! } : {}),
        ...(q.get('stack_name') || q.get('name') ? { name: (q.get('stack_name') ?? q.get('name'))! } : {}),
        ...(marker ? { marker } : {}),
      })
      return json({ stacks: res.stacks.map((s) => stackBody(d, c, s)) })
    })
    .add('POST', '/v1/:project/stacks', async (c) => {
      requireProject(c)
      const b = await body(c)
      if (typeof b.stack_name !== 'string') fail('stack_name is required')
      const res = await d.stacks.create(actorOf(c.principal), { name: b.stack_name as string, ...submission(b), template: submission(b).template ?? fail('template is required'), ...(Array.isArray(b.tags) ? { tags: b.tags as string[] } : typeof b.tags === 'string' ? { tags: b.tags.split(',') } : {}) })
      return json({ stack: { id: res.stack.id, links: [{ href: stackUrl(d, c, res.stack), rel: 'self' }] } }, 201)
    })
    .add('GET', '/v1/:project/stacks/:name/:id', async (c) => {
      const s = await identified(d, c)
      const full = await d.reads.show(actorOf(c.principal), String(s.id))
      return json({
        stack: {
          ...stackBody(d, c, full),
          parameters: Object.fromEntries(Object.entries({ 'OS::stack_id': full.id, 'OS::stack_name': full.name, 'OS::project_id': c.principal.projectId, ...full.parameters }).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)])),
          outputs: Object.entries(full.outputs).map(([k, o]) => ({ output_key: k, output_value: o.value, description: o.description ?? 'No description given', ...(o.error ? { output_error: o.error } : {}) })),
          template_description: full.description,
          timeout_mins: full.timeoutMins,
          disable_rollback: full.disableRollback,
          capabilities: [],
          notification_topics: [],
        },
      })
    })
}
