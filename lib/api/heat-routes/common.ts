/**
 * What every group of Heat routes shares: the URL's project checked against
 * the token's, the stack a `/stacks/{name}/{id}` path names, links and
 * redirects (to the configured public URL), Heat's times, and a 400 as Heat
 * words it.
 */
import type { Principal } from '../../services/accounts'
import { actorOf, type ApiDeps } from '../deps'
import { HttpError, type RouteContext } from '../http'

export type Ctx = RouteContext<Principal>

export const heatTime = (iso: string | null) => (iso ? iso.replace(/\.\d+Z$/, 'Z') : null)

export function fail(message: string): never {
  throw new HttpError(400, 'bad_request', message)
}

// Links and redirects name the configured public URL, never the request's Host header (which the client chooses).
export const projectUrl = (d: ApiDeps, c: Ctx) => `${d.publicUrl()}/v1/${c.params.project}`

/** The canonical URL of a stack: `/v1/{project}/stacks/{name}/{id}`. */
export const stackUrl = (d: ApiDeps, c: Ctx, s: { id?: unknown; name?: unknown }) => `${projectUrl(d, c)}/stacks/${encodeURIComponent(String(s.name))}/${s.id}`

/** The URL's project must be the token's (by id or name). */
export function requireProject(c: Ctx): void {
  const p = c.params.project
  if (p !== c.principal.projectId && p !== c.principal.projectName) throw new HttpError(403, 'forbidden', `the token is not valid for project ${p}`)
}

/** `/stacks/{name}/{id}`: the id decides; a name that does not match is a 404 as in Heat. */
export async function identified(d: ApiDeps, c: Ctx) {
  requireProject(c)
  if (c.params.id === undefined) return d.reads.stackRow(actorOf(c.principal), c.params.name!)
  const s = await d.reads.stackRow(actorOf(c.principal), c.params.id)
  if (s.name !== c.params.name && s.id !== c.params.name) throw new HttpError(404, 'not_found', `The Stack (${c.params.name}) could not be found.`)
  return s
}

/** `/stacks/{name or id}[/...]`: Heat redirects to the canonical `/stacks/{name}/{id}[/...]`. */
export async function redirect(d: ApiDeps, c: Ctx, suffix: string): Promise<Response> {
  requireProject(c)
  const s = await d.reads.stackRow(actorOf(c.principal), c.params.name!)
  const location = `${stackUrl(d, c, s)}${suffix}${c.url.search}`
  return new Response(null, { status: 302, headers: { location } })
}

/** The request's body: a JSON object. */
export async function body(c: Ctx): Promise<Record<string, unknown>> {
  const b = await c.json()
  if (typeof b !== 'object' || b === null || Array.isArray(b)) fail('the body must be a JSON object')
  return b as Record<string, unknown>
}
