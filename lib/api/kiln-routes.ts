/**
 * Kiln's own REST API (`/api/...`). Every body is validated once with zod;
 * every handler calls the service layer (lib/services) and nothing else.
 */
import { z } from 'zod'
import { describeType } from '../resources/registry'
import type { Principal } from '../services/accounts'
import { health, liveness } from '../services/health'
import { checkSubmission } from '../services/templates'
import { typeCatalog } from '../resources/registry'
import { ForbiddenError, ValidationError } from '../plan/errors'
import { actorOf, type ApiDeps } from './deps'
import { boolParam, HttpError, intParam, json, parse, Router, sessionCookie, tooManyAttempts, tooManyRequests } from './http'
import { openApiDocument } from './openapi'
import { webMetrics } from '../services/metrics'
import { signalFrom, type SignalService } from '../services/signals'
import { CancelBody, CreateBody, ImportBody, SignalBody, LoginBody, PreviewBody, ProjectBody, TokenBody, UPDATE_ONLY_FIELDS, UpdateBody, ValidateBody } from './schemas'
import { expectedFrom, stackEtag } from './versioning'
import { currentVersion, diffNamed, traversalVersion } from '../services/versions'
import { UUID } from '../ids'

const GRAPH_FORMATS = ['json', 'dot', 'graphml'] as const

export function kilnRoutes(d: ApiDeps, router: Router<Principal>, signals: SignalService): void {
  const accepted = (res: { stack: { id: string; name: string }; traversalId: string | null; action: string; superseded: string | null; noChanges?: true; templateId?: string }, status = 202) =>
    res.noChanges
      ? json({ stack: res.stack, action: res.action, traversalId: null, superseded: null, noChanges: true, message: 'no changes: the stack already converges to this template, environment and parameters; nothing was started (send force: true to start an update anyway)' }, 200)
      : json({ stack: res.stack, action: res.action, traversalId: res.traversalId, superseded: res.superseded, ...(res.templateId ? { templateId: res.templateId } : {}) }, status)
  /** An update request's guard: the version it was written against (body.expect or If-Match), and "no changes" unless forced. */
  const guardOf = (req: Request, b: { expect?: string | undefined; force?: boolean | undefined }) => {
    const expected = expectedFrom(b.expect, req.headers.get('if-match'))
    return { ...expected, skipUnchanged: b.force !== true }
  }

  router
    // Public: up or down, nothing about the machine. The details (hosts, pids, versions) are for admins.
    .add('GET', '/api/health', async () => {
      const status = await liveness(d.db)
      return json({ status }, status === 'up' ? 200 : 503)
    }, { public: true })
    .add('GET', '/api/health/details', async (c) => {
      if (c.principal.role !== 'admin') throw new ForbiddenError('the health details are for admin tokens')
      const h = await health(d.db, d.leaseMs)
      return json(h, h.status === 'down' ? 503 : 200)
    })
    .add('GET', '/api/openapi.json', () => json(openApiDocument()), { public: true })
    // Prometheus: for admin tokens (a scraper sends one as a bearer token). Workers serve their own.
    .add('GET', '/metrics', async (c) => {
      if (c.principal.role !== 'admin') throw new ForbiddenError('the metrics are for admin tokens')
      const m = await webMetrics(d.db, d.leaseMs)
      return new Response(m.body, { status: 200, headers: { 'content-type': m.contentType, 'cache-control': 'no-store' } })
    })

    // ---- session (browser login) ----
    .add('POST', '/api/session', async (c) => {
      const body = parse(LoginBody, await c.json())
      const wait = await d.failedAttempts.retryAfter(c.client.address)
      if (wait) throw tooManyAttempts(wait)
      const s = await d.accounts.login(body.token)
      if (!s) {
        await d.failedAttempts.failed(c.client.address)
        throw new HttpError(401, 'unauthorized', 'the token is unknown, revoked or expired')
      }
      const cookie = [`kiln_session=${s.cookie}`, 'Path=/', 'HttpOnly', 'SameSite=Strict', `Expires=${s.expiresAt.toUTCString()}`, ...(d.secureCookies ? ['Secure'] : [])].join('; ')
      return json({ project: { id: s.principal.projectId, name: s.principal.projectName }, name: s.principal.tokenName, csrfToken: s.csrfToken }, 200, { 'set-cookie': cookie })
    }, { public: true })
    .add('GET', '/api/session', (c) => json({ project: { id: c.principal.projectId, name: c.principal.projectName }, name: c.principal.tokenName, role: c.principal.role, via: c.principal.via, csrfToken: c.principal.csrfToken }))
    .add('DELETE', '/api/session', async (c) => {
      const cookie = sessionCookie(c.req)
      if (cookie) await d.accounts.logout(cookie)
      return json(null, 204, { 'set-cookie': 'kiln_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0' })
    })

    // ---- tokens and projects ----
    .add('GET', '/api/tokens', async (c) => json({ tokens: await d.accounts.listTokens(c.principal) }))
    .add('POST', '/api/tokens', async (c) => {
      const b = parse(TokenBody, await c.json())
      return json({ token: await d.accounts.createToken(c.principal, b.name, b.expiresInDays ?? null) }, 201)
    })
    .add('DELETE', '/api/tokens/:token', async (c) => {
      await d.accounts.revokeToken(c.principal, uuid(c.params.token!, 'token'))
      return json(null, 204)
    })
    .add('POST', '/api/projects', async (c) => json({ project: await d.accounts.createProject(c.principal, parse(ProjectBody, await c.json()).name) }, 201))

    // ---- resource types and templates ----
    .add('GET', '/api/resource-types', () => json({ resourceTypes: d.registry.list().map((t) => ({ name: t.name, description: t.description })) }))
    .add('GET', '/api/resource-types/:type', (c) => {
      const t = d.registry.get(c.params.type!)
      if (!t) throw new HttpError(404, 'not_found', `resource type ${c.params.type} not found`)
      return json(describeType(t))
    })
    .add('POST', '/api/templates/validate', async (c) => {
      const b = parse(ValidateBody, await c.json())
      const checked = await validateLeniently(d, b)
      const t = checked.summary
      return json({
        valid: true,
        version: t.version,
        description: t.description ?? '',
        parameters: t.parameters.map((p) => ({ name: p.name, type: p.type, label: p.label ?? null, description: p.description ?? '', default: p.hidden ? undefined : p.default, hidden: p.hidden, constraints: p.constraints })),
        parameterGroups: t.parameterGroups,
        resources: checked.plan.names.map((name) => ({ name, type: checked.plan.types[name], dependsOn: checked.plan.dependsOn[name] })),
        outputs: t.outputs,
      })
    })

    // ---- stacks ----
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

    // ---- saved plans ----
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

    // ---- import: adopt existing objects (external_id) into a new or existing stack ----
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
    .add('POST', '/api/stacks/:stack/cancel', async (c) => accepted(await d.stacks.cancel(actorOf(c.principal), c.params.stack!, parse(CancelBody, await c.json()))))
    .add('POST', '/api/stacks/:stack/rollback', async (c) => accepted(await d.stacks.rollback(actorOf(c.principal), c.params.stack!)))
    .add('POST', '/api/stacks/:stack/check', async (c) => accepted(await d.stacks.check(actorOf(c.principal), c.params.stack!)))
    .add('POST', '/api/stacks/:stack/drift', async (c) => accepted(await d.stacks.drift(actorOf(c.principal), c.params.stack!)))
    .add('GET', '/api/stacks/:stack/drift', async (c) => json({ drift: await d.reads.drift(actorOf(c.principal), c.params.stack!) }))
    .add('GET', '/api/stacks/:stack/snapshots', async (c) => json({ snapshots: await d.reads.snapshots(actorOf(c.principal), c.params.stack!) }))
    .add('DELETE', '/api/stacks/:stack/snapshots/:snapshot', async (c) => {
      await d.snapshots.delete(actorOf(c.principal), c.params.stack!, snapshotName(c.params.snapshot!))
      return json(null, 204)
    })
    .add('GET', '/api/snapshots', async (c) => json({ snapshots: await d.snapshots.list(actorOf(c.principal)) }))
    .add('POST', '/api/stacks/:stack/resources/:resource/signal', async (c) => {
      const stack = await d.reads.stackRow(actorOf(c.principal), c.params.stack!)
      const body = parse(SignalBody, await c.json())
      return json({ signal: await signals.signal(signalFrom(c.principal), String(stack.id), c.params.resource!, body) })
    }, { signalToken: true })
    .add('GET', '/api/stacks/:stack/resources/:resource', async (c) => {
      const id = rowId(c.params.resource!)
      const [row] = await d.reads.resources(actorOf(c.principal), c.params.stack!, { id })
      if (!row) throw new HttpError(404, 'not_found', `resource row ${id} not found`)
      return json({ resource: row })
    })
    .add('GET', '/api/stacks/:stack/workers', async (c) => {
      const ids = (c.url.searchParams.get('ids') ?? '').split(',').filter(Boolean)
      if (ids.length > MAX_WORKER_IDS) throw new HttpError(400, 'invalid_query', `ids: at most ${MAX_WORKER_IDS} worker ids`)
      for (const id of ids) if (!UUID.test(id)) throw new HttpError(400, 'invalid_query', `ids: ${id.slice(0, 40)} is not a worker id`)
      return json({ workers: await d.reads.workers(actorOf(c.principal), c.params.stack!, ids) })
    })
    .add('GET', '/api/stacks/:stack/resources', async (c) => json({ resources: await d.reads.resources(actorOf(c.principal), c.params.stack!, { all: c.url.searchParams.get('all') === 'true' || c.url.searchParams.get('all') === '1' }) }))
    .add('GET', '/api/stacks/:stack/events', async (c) => {
      const q = c.url.searchParams
      return json(
        await d.reads.events(actorOf(c.principal), c.params.stack!, {
          after: intParam(q.get('after'), 0, 0, Number.MAX_SAFE_INTEGER, 'after'),
          limit: intParam(q.get('limit'), 200, 1, 5000, 'limit'),
          ...(q.get('resource') ? { resource: q.get('resource')! } : {}),
          // `current`: the stack's current traversal, resolved with the page (the answer's traversalId says which; null: none runs)
          ...(q.get('traversal') ? { traversal: q.get('traversal') === 'current' ? 'current' : uuid(q.get('traversal')!, 'traversal') } : {}),
        }),
      )
    })
    .add('GET', '/api/stacks/:stack/traversals', async (c) => json({ traversals: await d.reads.traversals(actorOf(c.principal), c.params.stack!) }))
    .add('GET', '/api/stacks/:stack/traversals/:traversal', async (c) => {
      const t = c.params.traversal === 'current' ? 'current' : uuid(c.params.traversal!, 'traversal')
      return json({ traversal: await d.reads.traversal(actorOf(c.principal), c.params.stack!, t) })
    })
    .add('GET', '/api/stacks/:stack/traversals/:traversal/graph', async (c) => {
      const format = (c.url.searchParams.get('format') ?? 'json') as (typeof GRAPH_FORMATS)[number]
      if (!GRAPH_FORMATS.includes(format)) throw new HttpError(400, 'invalid_query', `format must be one of ${GRAPH_FORMATS.join(', ')}`)
      const t = c.params.traversal === 'current' ? 'current' : uuid(c.params.traversal!, 'traversal')
      const g = await d.reads.graph(actorOf(c.principal), c.params.stack!, t, format)
      return new Response(g.body, { headers: { 'content-type': g.contentType, 'content-disposition': `inline; filename="${g.filename}"`, 'cache-control': 'no-store' } })
    })
    .add('GET', '/api/stacks/:stack/template', async (c) => json(await d.reads.template(actorOf(c.principal), c.params.stack!)))
    // A traversal's template version (the template it converges to), hidden values masked: the history's and `kiln stack diff`'s.
    .add('GET', '/api/stacks/:stack/traversals/:traversal/template', async (c) => {
      const stack = await d.stacks.find(actorOf(c.principal), c.params.stack!)
      // `current`: the template the stack converges to now (also after a cancel left no traversal current).
      if (c.params.traversal === 'current') return json(await currentVersion(d.db, stack))
      return json(await traversalVersion(d.db, stack.id, uuid(c.params.traversal!, 'traversal')))
    })
    // Two versions (traversal or template ids; `current` for the stack's template) as a diff of templates, environments and parameters.
    .add('GET', '/api/stacks/:stack/diff', async (c) => {
      const stack = await d.stacks.find(actorOf(c.principal), c.params.stack!)
      const q = c.url.searchParams
      const from = q.get('from')
      const to = q.get('to') ?? 'current'
      if (!from) throw new HttpError(400, 'invalid_query', 'from is required: a traversal id or a template id of the stack, or current')
      return json(await diffNamed(d.db, stack, from, to))
    })
    .add('GET', '/api/stacks/:stack/outputs', async (c) => json({ outputs: await d.reads.outputs(actorOf(c.principal), c.params.stack!) }))
    // A sensitive output's value is shown only here, asked for by name with reveal=true.
    .add('GET', '/api/stacks/:stack/outputs/:key', async (c) => {
      const reveal = boolParam(c.url.searchParams.get('reveal'), 'reveal')
      return json({ output: { key: c.params.key!, ...(await d.reads.output(actorOf(c.principal), c.params.stack!, c.params.key!, { reveal })) } })
    })
}

const MAX_WORKER_IDS = 100

/** A resource row id in a path: anything else names no row. */
function rowId(v: string): number {
  if (!/^\d{1,10}$/.test(v) || Number(v) > 2 ** 31 - 1) throw new HttpError(404, 'not_found', `resource row ${v} not found`)
  return Number(v)
}

/** A body field that is valid but not honoured where it was sent: a 400 naming it, never silently ignored. */
export function refused(field: string, message: string): ValidationError {
  return new ValidationError(`body.${field}: ${message}`, [{ code: 'structure', path: `body.${field}`, line: null, column: null, message }])
}

/** Why a preview or a plan refuses a field only an update honours. */
const UPDATE_ONLY_REASONS: Record<(typeof UPDATE_ONLY_FIELDS)[number], string> = {
  converge: 'a preview does not observe resources; run a drift check (POST /api/stacks/{stack}/drift) to see what converge would bring back',
  preempt: 'a preview stops nothing; send preempt with the update itself',
  tags: 'a preview changes no tags; send them with the update itself',
}

/** A preview's or a plan's body: the update-only fields are refused by name, with the reason, before the strict parse. */
function previewBody(raw: unknown) {
  if (raw && typeof raw === 'object') {
    for (const f of UPDATE_ONLY_FIELDS) if (f in raw) throw refused(f, UPDATE_ONLY_REASONS[f])
  }
  return parse(PreviewBody, raw)
}

/** A snapshot's name in a path (a PostgreSQL database name Kiln makes): anything else names none. */
function snapshotName(v: string): string {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(v)) throw new HttpError(404, 'not_found', `snapshot ${v.slice(0, 80)} not found`)
  return v
}

function uuid(v: string, what: string): string {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(v)) throw new HttpError(404, 'not_found', `${what} ${v} not found`)
  return v
}

/** Validate a template for the editor: parameters without a value are fine here (the form asks for them) unless `strict`. */
export function validateLeniently(d: ApiDeps, b: z.infer<typeof ValidateBody>) {
  return checkSubmission(b, {
    catalog: typeCatalog(d.registry),
    limits: d.limits,
    stackName: 'validate',
    allowMissingParameters: b.strict !== true,
  })
}
