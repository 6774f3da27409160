/**
 * The API entry point: `createApi(deps)` returns `(Request, client) => Response`
 * for `/api/*` (Kiln's REST API) and `/v1/*` (Heat's Orchestration API).
 *
 * Authentication, once, here: an API token (`X-Auth-Token` or
 * `Authorization: Bearer`) or the browser's session cookie. A cookie-
 * authenticated request that changes state must carry the session's CSRF
 * token in `X-CSRF-Token` and, when the browser sends one, a same-origin
 * `Origin`. Heat routes take tokens only, as Heat does. A client address that
 * ran out of failed token attempts is answered 429 (lib/auth/failed-attempts.ts).
 * Every response carries the security headers; every /v1 error is Heat's body.
 */
import type { Principal } from '../services/accounts'
import { LimitError } from '../plan/errors'
import { API_SECURITY_HEADERS } from '../server/security-headers'
import type { ApiDeps } from './deps'
import { heatError } from './heat-errors'
import { heatRoutes } from './heat-routes'
import { clientInputError, errorResponse, HttpError, parseJsonBody, readBody, Router, sessionCookie, tooManyAttempts, unauthorized, type ClientInfo } from './http'
import { kilnRoutes } from './kiln-routes'
import { processMetrics } from '../metrics/registry'
import { createSignalService } from '../services/signals'
import { SIGNAL_TOKEN_PREFIX } from '../resources/builtin/wait-condition'

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS'])

export function createApi(d: ApiDeps): (req: Request, client?: ClientInfo) => Promise<Response> {
  const router = new Router<Principal>()
  const signals = createSignalService(d.db.pool, { types: d.registry, log: d.log })
  kilnRoutes(d, router, signals)
  heatRoutes(d, router, signals)

  async function authenticate(req: Request, url: URL, heat: boolean, client: ClientInfo, signalToken: boolean): Promise<Principal> {
    const header = req.headers.get('x-auth-token') ?? /^Bearer\s+(.+)$/i.exec(req.headers.get('authorization') ?? '')?.[1]?.trim()
    if (header) {
      const wait = await d.failedAttempts.retryAfter(client.address)
      if (wait) throw tooManyAttempts(wait)
      if (signalToken && header.startsWith(SIGNAL_TOKEN_PREFIX)) {
        const h = await signals.tokenHandle(header)
        if (h) return { tokenId: h.uuid, tokenName: `the signal token of ${h.name}`, projectId: h.projectId, projectName: '', role: 'signal', expiresAt: null, via: 'signal', signalHandle: h.uuid, csrfToken: null }
      }
      const p = await d.accounts.byToken(header)
      if (!p) {
        await d.failedAttempts.failed(client.address)
        throw unauthorized('the token is unknown, revoked or expired')
      }
      return p
    }
    if (heat) throw unauthorized('send an API token in X-Auth-Token')
    // A session cookie is 256 random bits, and a stale one is common (a session that expired): not counted.
    const cookie = sessionCookie(req)
    if (!cookie) throw unauthorized()
    const p = await d.accounts.bySession(cookie)
    if (!p) throw unauthorized('the session has expired; log in again')
    if (!SAFE.has(req.method)) {
      const origin = req.headers.get('origin')
      if (origin && origin !== url.origin) throw new HttpError(403, 'csrf', `cross-origin request from ${origin} refused`)
      if (req.headers.get('x-csrf-token') !== p.csrfToken) throw new HttpError(403, 'csrf', 'missing or wrong X-CSRF-Token header')
    }
    return p
  }

  return async function handle(req: Request, client: ClientInfo = {}): Promise<Response> {
    const url = new URL(req.url)
    const heat = url.pathname.startsWith('/v1/')
    const started = Date.now()
    let res: Response
    let route = 'unmatched'
    try {
      // Any route, whether or not it reads a body: an oversize request is refused before anything else.
      const declared = Number(req.headers.get('content-length') ?? '0')
      if (declared > d.maxBodyBytes) throw new LimitError(`the request body is ${declared} bytes; the limit is ${d.maxBodyBytes}`, 'body_bytes', d.maxBodyBytes)
      const m = router.match(req.method, url.pathname)
      if (!m) throw new HttpError(404, 'not_found', `no route for ${req.method} ${url.pathname}`)
      if (!('allowed' in m)) route = m.route.path
      if ('allowed' in m) {
        const allow = [...new Set(m.allowed)].join(', ')
        throw new HttpError(405, 'method_not_allowed', `${req.method} is not allowed here; use ${allow}`, {}, { allow })
      }
      const principal = m.route.public ? (null as unknown as Principal) : await authenticate(req, url, heat, client, m.route.signalToken)
      // Read before the route runs, whether or not it uses the body: a body found to be over the limit
      // while reading (chunked, no Content-Length) is refused too, never ignored. Decoded only if used.
      const body = await readBody(req, d.maxBodyBytes)
      res = await m.route.handler({ req, url, params: m.params, principal, client, json: async () => parseJsonBody(body, req.headers.get('content-type') ?? '') })
    } catch (err) {
      const logUnexpected = (e: unknown) => d.log.error(`${req.method} ${url.pathname}: ${e instanceof Error ? e.stack : String(e)}`)
      res = heat ? heatError(clientInputError(err) ?? err, logUnexpected) : errorResponse(err, logUnexpected)
    }
    for (const [k, v] of Object.entries(API_SECURITY_HEADERS)) res.headers.set(k, v)
    // Paths only: query strings and bodies may carry values that must not reach logs.
    d.log.debug(`${req.method} ${url.pathname} ${res.status} ${Date.now() - started}ms`)
    // Route patterns, never paths: a label per stack id would grow without bound.
    processMetrics('web').apiLatency.observe({ route, method: req.method, status: `${Math.floor(res.status / 100)}xx` }, (Date.now() - started) / 1000)
    return res
  }
}
