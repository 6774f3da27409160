/**
 * Heat's Orchestration API v1 (`/v1/{project_id}/...`), enough of it that
 * python-heatclient and python-openstackclient work unchanged: field names,
 * `<ACTION>_<STATUS>` strings, ISO times without fractions, the
 * `/stacks/{name}` redirect (to the configured public URL), 202 for an update
 * while IN_PROGRESS, and Heat's error body (heat-errors.ts). Every handler goes
 * through the same service layer as Kiln's own API.
 */
import { describeType } from '../resources/registry'
import type { Principal } from '../services/accounts'
import { NotFoundError } from '../plan/errors'
import type { PreviewItem } from '../services/preview'
import { MASK } from '../services/reads'
import { actorOf, type ApiDeps } from './deps'
import { HttpError, intParam, json, parse, Router, type RouteContext } from './http'
import { SignalBody } from './schemas'
import { signalFrom, type SignalService } from '../services/signals'
import { validateLeniently } from './kiln-routes'

const heatTime = (iso: string | null) => (iso ? iso.replace(/\.\d+Z$/, 'Z') : null)
const HEAT_TYPES: Record<string, string> = { string: 'String', number: 'Number', boolean: 'Boolean', json: 'Json', comma_delimited_list: 'CommaDelimitedList' }

type Ctx = RouteContext<Principal>

export function heatRoutes(d: ApiDeps, router: Router<Principal>, signals: SignalService): void {
  // Links and redirects name the configured public URL, never the request's Host header (which the client chooses).
  const base = (c: Ctx) => `${d.publicUrl()}/v1/${c.params.project}`
  const stackLink = (c: Ctx, s: { id: string; name: string }) => `${base(c)}/stacks/${encodeURIComponent(s.name)}/${s.id}`

  /** The URL's project must be the token's (by id or name). */
  const project = (c: Ctx) => {
    const p = c.params.project
    if (p !== c.principal.projectId && p !== c.principal.projectName) throw new HttpError(403, 'forbidden', `the token is not valid for project ${p}`)
  }
  /** `/stacks/{name}/{id}`: the id decides; a name that does not match is a 404 as in Heat. */
  const identified = async (c: Ctx) => {
    project(c)
    if (c.params.id === undefined) return d.reads.stackRow(actorOf(c.principal), c.params.name!)
    const s = await d.reads.stackRow(actorOf(c.principal), c.params.id)
    if (s.name !== c.params.name && s.id !== c.params.name) throw new HttpError(404, 'not_found', `The Stack (${c.params.name}) could not be found.`)
    return s
  }

  function stackBody(c: Ctx, s: Awaited<ReturnType<typeof d.reads.show>> | Awaited<ReturnType<typeof d.reads.list>>['stacks'][number]) {
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
      links: [{ href: stackLink(c, s), rel: 'self' }],
    }
  }

  const submission = (b: Record<string, unknown>) => {
    const template = b.template ?? (typeof b.template_url === 'string' ? fail('template_url is not supported: send the template itself') : undefined)
    // Inputs Kiln cannot honour are refused, never ignored.
    if (b.files_container !== undefined && b.files_container !== null) fail('files_container is not supported: Kiln has no Swift to read files from; send the template and environment themselves')
    if (b.adopt_stack_data !== undefined && b.adopt_stack_data !== null) fail("adopt_stack_data (Heat's stack adopt) is not supported: give the resources to adopt an external_id and import them (POST /api/import)")
    const environment = (b.environment ?? undefined) as Record<string, unknown> | string | undefined
    const files = b.files as Record<string, unknown> | undefined
    if (files && Object.keys(files).length && environment && typeof environment === 'object' && environment.resource_registry) {
      // heatclient sends nested templates as files; Kiln has no nested stacks.
      for (const v of Object.values(environment.resource_registry as Record<string, unknown>)) if (typeof v === 'string' && v in files) fail('nested stacks (templates in files) are not supported')
    }
    return {
      ...(template !== undefined ? { template: typeof template === 'string' || (typeof template === 'object' && template !== null) ? (template as string | Record<string, unknown>) : fail('template must be a map or a string') } : {}),
      ...(environment !== undefined ? { environment } : {}),
      ...(b.parameters ? { parameters: b.parameters as Record<string, unknown> } : {}),
      ...(typeof b.timeout_mins === 'number' ? { timeoutMins: b.timeout_mins } : {}),
      ...(typeof b.disable_rollback === 'boolean' ? { disableRollback: b.disable_rollback } : {}),
    }
  }
  /** Heat's boolean body fields: a JSON boolean, or the strings true/false (Heat's extract_bool); anything else is a 400 naming the field. */
  const flag = (b: Record<string, unknown>, key: string): boolean | undefined => {
    const v = b[key]
    if (v === undefined || v === null) return undefined
    if (typeof v === 'boolean') return v
    if (typeof v === 'string' && /^(true|false)$/i.test(v)) return v.toLowerCase() === 'true'
    return fail(`${key} must be true or false (got ${JSON.stringify(v)})`)
  }
  /** Heat's tags: a list of strings, or one comma-separated string (as heatclient sends them). */
  const tagsOf = (b: Record<string, unknown>): string[] | undefined => {
    const t = b.tags
    if (t === undefined || t === null) return undefined
    if (typeof t === 'string') return t.split(',').map((s) => s.trim()).filter(Boolean)
    if (Array.isArray(t) && t.every((s) => typeof s === 'string')) return t as string[]
    return fail('tags must be a list of strings or a comma-separated string')
  }
  /**
   * The fields only an update takes (converge, tags, clear_parameters on a PATCH), refused where they would be
   * ignored: on a preview, which changes and observes nothing, and clear_parameters on a PUT, which reuses no
   * stored parameters.
   */
  const updateOnly = (b: Record<string, unknown>, how: { preview: boolean; reusesParameters: boolean }) => {
    const converge = flag(b, 'converge')
    const tags = tagsOf(b)
    const clear = b.clear_parameters
    if (clear !== undefined && clear !== null && !(Array.isArray(clear) && clear.every((s) => typeof s === 'string'))) fail('clear_parameters must be a list of parameter names')
    const clearParameters = (clear as string[] | undefined | null) ?? undefined
    if (how.preview) {
      if (converge) fail('converge: a preview does not observe resources; run a drift check (POST /api/stacks/{stack}/drift) to see what converge would bring back')
      if (tags) fail('tags: a preview changes no tags; send them with the update itself')
    }
    if (!how.reusesParameters && clearParameters?.length) fail('clear_parameters: an update with a new template reuses no stored parameters; clear them with PATCH (openstack stack update --existing --clear-parameter)')
    return { ...(converge ? { converge } : {}), ...(tags ? { tags } : {}), ...(clearParameters?.length ? { clearParameters } : {}) }
  }
  const body = async (c: Ctx) => {
    const b = await c.json()
    if (typeof b !== 'object' || b === null || Array.isArray(b)) fail('the body must be a JSON object')
    return b as Record<string, unknown>
  }

  router
    // `/stacks/{name or id}[/...]` (registered first, so `events` is never taken for an id): Heat redirects to the canonical `/stacks/{name}/{id}[/...]`.
    .add('GET', '/v1/:project/stacks/:name', (c) => redirect(c, ''))
    .add('GET', '/v1/:project/stacks/:name/resources', (c) => redirect(c, '/resources'))
    .add('GET', '/v1/:project/stacks/:name/events', (c) => redirect(c, '/events'))
    .add('GET', '/v1/:project/stacks/:name/template', (c) => redirect(c, '/template'))
    .add('GET', '/v1/:project/stacks/:name/outputs', (c) => redirect(c, '/outputs'))
    // Deleting by name or id directly: a redirected DELETE may come back as a GET from some HTTP clients.
    .add('DELETE', '/v1/:project/stacks/:name', async (c) => {
      project(c)
      await d.stacks.delete(actorOf(c.principal), c.params.name!)
      return new Response(null, { status: 204 })
    })
    .add('GET', '/v1/:project/stacks/:name/resources/:resource', (c) => redirect(c, `/resources/${encodeURIComponent(c.params.resource!)}`))
    .add('GET', '/v1/:project/stacks/:name/resources/:resource/events', (c) => redirect(c, `/resources/${encodeURIComponent(c.params.resource!)}/events`))
    .add('GET', '/v1/:project/stacks/:name/outputs/:key', (c) => redirect(c, `/outputs/${encodeURIComponent(c.params.key!)}`))
    .add('GET', '/v1/:project/stacks', async (c) => {
      project(c)
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
      return json({ stacks: res.stacks.map((s) => stackBody(c, s)) })
    })
    .add('POST', '/v1/:project/stacks', async (c) => {
      project(c)
      const b = await body(c)
      if (typeof b.stack_name !== 'string') fail('stack_name is required')
      const res = await d.stacks.create(actorOf(c.principal), { name: b.stack_name as string, ...submission(b), template: submission(b).template ?? fail('template is required'), ...(Array.isArray(b.tags) ? { tags: b.tags as string[] } : typeof b.tags === 'string' ? { tags: b.tags.split(',') } : {}) })
      return json({ stack: { id: res.stack.id, links: [{ href: stackLink(c, res.stack), rel: 'self' }] } }, 201)
    })
    .add('POST', '/v1/:project/validate', async (c) => {
      project(c)
      const b = await body(c)
      const checked = await validateLeniently(d, { template: submission(b).template ?? fail('template is required'), ...(b.environment ? { environment: b.environment as Record<string, unknown> } : {}), ...(b.parameters ? { parameters: b.parameters as Record<string, unknown> } : {}) })
      const t = checked.summary
      return json({
        Description: t.description ?? 'No description',
        Parameters: Object.fromEntries(
          t.parameters.map((p) => [
            p.name,
            { Type: HEAT_TYPES[p.type], Description: p.description ?? '', Label: p.label ?? p.name, NoEcho: p.hidden ? 'true' : 'false', ...(p.default !== undefined ? { Default: p.hidden ? MASK : p.default } : {}) },
          ]),
        ),
        ...(t.parameterGroups.length ? { ParameterGroups: t.parameterGroups } : {}),
      })
    })
    .add('GET', '/v1/:project/resource_types', (c) => {
      project(c)
      const withDescription = c.url.searchParams.get('with_description') === 'true'
      const types = d.registry.list()
      return json({ resource_types: withDescription ? types.map((t) => ({ resource_type: t.name, description: t.description })) : types.map((t) => t.name) })
    })
    .add('GET', '/v1/:project/resource_types/:type', (c) => {
      project(c)
      const t = d.registry.get(c.params.type!)
      if (!t) throw new HttpError(404, 'not_found', `The Resource Type (${c.params.type}) could not be found.`)
      return json(describeType(t))
    })

    // ---- one stack ----
    .add('GET', '/v1/:project/stacks/:name/:id', async (c) => {
      const s = await identified(c)
      const full = await d.reads.show(actorOf(c.principal), String(s.id))
      return json({
        stack: {
          ...stackBody(c, full),
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
    .add('PUT', ['/v1/:project/stacks/:name/:id', '/v1/:project/stacks/:name'], async (c) => {
      const s = await identified(c)
      const raw = await body(c)
      const b = submission(raw)
      if (b.template === undefined) fail('template is required (use PATCH to reuse the existing template)')
      await d.stacks.update(actorOf(c.principal), String(s.id), { ...b, ...updateOnly(raw, { preview: false, reusesParameters: false }) })
      return new Response(null, { status: 202 })
    })
    .add('PATCH', ['/v1/:project/stacks/:name/:id', '/v1/:project/stacks/:name'], async (c) => {
      const s = await identified(c)
      const raw = await body(c)
      const b = submission(raw)
      await d.stacks.update(actorOf(c.principal), String(s.id), { ...b, ...updateOnly(raw, { preview: false, reusesParameters: b.template === undefined }), existing: b.template === undefined })
      return new Response(null, { status: 202 })
    })
    .add('DELETE', '/v1/:project/stacks/:name/:id', async (c) => {
      const s = await identified(c)
      await d.stacks.delete(actorOf(c.principal), String(s.id))
      return new Response(null, { status: 204 })
    })
    .add('PUT', ['/v1/:project/stacks/:name/:id/preview', '/v1/:project/stacks/:name/preview'], async (c) => {
      const s = await identified(c)
      const raw = await body(c)
      const b = submission(raw)
      const p = await d.stacks.preview(actorOf(c.principal), String(s.id), { ...b, ...updateOnly(raw, { preview: true, reusesParameters: b.template === undefined }), existing: b.template === undefined })
      const group = (a: PreviewItem['action']) => p.items.filter((i) => i.action === a).map((i) => ({ resource_name: i.name, resource_type: i.type, resource_action: 'INIT', resource_status: 'COMPLETE', resource_identity: {}, stack_name: s.name, stack_identity: { stack_id: s.id, stack_name: s.name, tenant: c.principal.projectId, path: '' } }))
      return json({ resource_changes: { added: group('create'), updated: group('update'), replaced: group('replace'), deleted: group('delete'), unchanged: group('unchanged') } })
    })
    .add('POST', ['/v1/:project/stacks/:name/:id/actions', '/v1/:project/stacks/:name/actions'], async (c) => {
      const s = await identified(c)
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
    .add('GET', '/v1/:project/stacks/:name/:id/template', async (c) => {
      const s = await identified(c)
      return json((await d.reads.template(actorOf(c.principal), String(s.id))).template)
    })
    .add('GET', '/v1/:project/stacks/:name/:id/outputs', async (c) => {
      const s = await identified(c)
      const outs = await d.reads.outputs(actorOf(c.principal), String(s.id))
      return json({ outputs: Object.entries(outs).map(([k, o]) => ({ output_key: k, description: o.description ?? 'No description given' })) })
    })
    .add('GET', '/v1/:project/stacks/:name/:id/outputs/:key', async (c) => {
      const s = await identified(c)
      // `openstack stack output show` names the output: an explicit request, so a sensitive one is shown.
      const o = await d.reads.output(actorOf(c.principal), String(s.id), c.params.key!, { reveal: true }).catch((err: unknown) => {
        if (err instanceof NotFoundError) throw new HttpError(404, 'not_found', `Specified output key ${c.params.key} not found.`)
        throw err
      })
      return json({ output: { output_key: c.params.key, output_value: o.value, description: o.description ?? 'No description given', ...(o.error ? { output_error: o.error } : {}) } })
    })
    .add('GET', '/v1/:project/stacks/:name/:id/resources', async (c) => {
      const s = await identified(c)
      const rows = current(await d.reads.resources(actorOf(c.principal), String(s.id)))
      return json({ resources: rows.map((r) => resourceBody(c, s, r, rows)) })
    })
    .add('GET', '/v1/:project/stacks/:name/:id/resources/:resource', async (c) => {
      const s = await identified(c)
      const rows = current(await d.reads.resources(actorOf(c.principal), String(s.id)))
      const r = rows.find((x) => x.name === c.params.resource)
      if (!r) throw new HttpError(404, 'not_found', `The Resource (${c.params.resource}) could not be found.`)
      return json({ resource: { ...resourceBody(c, s, r, rows), attributes: r.attributes, description: r.description, metadata: {} } })
    })
    // Heat's resource-signal: 200 with no body.
    .add('POST', '/v1/:project/stacks/:name/:id/resources/:resource/signal', async (c) => {
      const s = await identified(c)
      const body = parse(SignalBody, await c.json())
      await signals.signal(signalFrom(c.principal), String(s.id), c.params.resource!, body)
      return json(null)
    }, { signalToken: true })
    .add('GET', '/v1/:project/stacks/:name/:id/events', async (c) => {
      const s = await identified(c)
      return json({ events: await heatEvents(c, s, null) })
    })
    .add('GET', '/v1/:project/stacks/:name/:id/resources/:resource/events', async (c) => {
      const s = await identified(c)
      return json({ events: await heatEvents(c, s, c.params.resource!) })
    })


  async function redirect(c: Ctx, suffix: string): Promise<Response> {
    project(c)
    const s = await d.reads.stackRow(actorOf(c.principal), c.params.name!)
    const location = `${base(c)}/stacks/${encodeURIComponent(String(s.name))}/${s.id}${suffix}${c.url.search}`
    return new Response(null, { status: 302, headers: { location } })
  }

  type Row = Awaited<ReturnType<typeof d.reads.resources>>[number]
  /** Heat lists one resource per name: the newest row that is not deleted. */
  function current(rows: Row[]): Row[] {
    const byName = new Map<string, Row>()
    for (const r of rows) if (!byName.has(r.name) || byName.get(r.name)!.id < r.id) byName.set(r.name, r)
    return [...byName.values()].sort((a, b) => a.name.localeCompare(b.name))
  }

  function resourceBody(c: Ctx, s: Record<string, unknown>, r: Row, all: Row[]) {
    const link = `${base(c)}/stacks/${encodeURIComponent(String(s.name))}/${s.id}`
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

  async function heatEvents(c: Ctx, s: Record<string, unknown>, resource: string | null) {
    const q = c.url.searchParams
    const desc = q.get('sort_dir') === 'desc'
    const marker = q.get('marker')
    const limit = intParam(q.get('limit'), 1000, 1, 10_000, 'limit')
    const all: ReturnType<typeof toHeat>[] = []
    let after = 0
    // Only stack and resource state changes are Heat events (node/lock/progress are Kiln's own).
    for (;;) {
      const page = await d.reads.events(actorOf(c.principal), String(s.id), { after, limit: 1000, ...(resource ? { resource } : {}) })
      for (const e of page.events) if (e.kind === 'stack' || e.kind === 'resource') all.push(toHeat(e))
      if (page.events.length < 1000) break
      after = page.events.at(-1)!.seq
    }
    function toHeat(e: Awaited<ReturnType<typeof d.reads.events>>['events'][number]) {
      const isStack = e.kind === 'stack'
      const link = `${base(c)}/stacks/${encodeURIComponent(String(s.name))}/${s.id}`
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
    let list = desc ? all.reverse() : all
    if (marker) {
      const i = list.findIndex((e) => e.id === marker)
      list = i >= 0 ? list.slice(i + 1) : list
    }
    const status = q.get('resource_status')
    if (status) list = list.filter((e) => e.resource_status.endsWith(status.toUpperCase()))
    return list.slice(0, limit)
  }
}

function fail(message: string): never {
  throw new HttpError(400, 'bad_request', message)
}

