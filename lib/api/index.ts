/**
 * The API entry point: `createApi(deps)` returns `(Request) => Response` for
 * `/api/*` (Kiln's REST API) and `/v1/*` (Heat's Orchestration API).
 *
 * Authentication, once, here: an API token (`X-Auth-Token` or
 * `Authorization: Bearer`) or the browser's session cookie. A cookie-
 * authenticated request that changes state must carry the session's CSRF
 * token in `X-CSRF-Token` and, when the browser sends one, a same-origin
 * `Origin`. Heat routes take tokens only, as Heat does.
 */
import type { Principal } from '../services/accounts'
import { LimitError } from '../services/errors'
import type { ApiDeps } from './deps'
import { heatError, heatRoutes } from './heat-routes'
import { clientInputError, errorResponse, HttpError, json, parseJsonBody, readBody, Router, sessionCookie, unauthorized } from './http'
import { kilnRoutes } from './kiln-routes'

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS'])

export function createApi(d: ApiDeps): (req: Request) => Promise<Response> {
  const router = new Router<Principal>()
  kilnRoutes(d, router)
  heatRoutes(d, router)

  async function authenticate(req: Request, url: URL, heat: boolean): Promise<Principal> {
    const header = req.headers.get('x-auth-token') ?? /^Bearer\s+(.+)$/i.exec(req.headers.get('authorization') ?? '')?.[1]?.trim()
    if (header) {
      const p = await d.accounts.byToken(header)
      if (!p) throw unauthorized('the token is unknown, revoked or expired')
      return p
    }
    if (heat) throw unauthorized('send an API token in X-Auth-Token')
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

  return async function handle(req: Request): Promise<Response> {
    const url = new URL(req.url)
    const heat = url.pathname.startsWith('/v1/')
    const started = Date.now()
    let res: Response
    try {
      // Any route, whether or not it reads a body: an oversize request is refused before anything else.
      const declared = Number(req.headers.get('content-length') ?? '0')
      if (declared > d.maxBodyBytes) throw new LimitError(`the request body is ${declared} bytes; the limit is ${d.maxBodyBytes}`, 'body_bytes', d.maxBodyBytes)
      const m = router.match(req.method, url.pathname)
      if (!m) throw new HttpError(404, 'not_found', `no route for ${req.method} ${url.pathname}`)
      if ('allowed' in m) {
        res = json({ error: { code: 'method_not_allowed', message: `${req.method} is not allowed here; use ${[...new Set(m.allowed)].join(', ')}` } }, 405, { allow: [...new Set(m.allowed)].join(', ') })
      } else {
        const principal = m.route.public ? (null as unknown as Principal) : await authenticate(req, url, heat)
        // Read before the route runs, whether or not it uses the body: a body found to be over the limit
        // while reading (chunked, no Content-Length) is refused too, never ignored. Decoded only if used.
        const body = await readBody(req, d.maxBodyBytes)
        res = await m.route.handler({ req, url, params: m.params, principal, json: async () => parseJsonBody(body, req.headers.get('content-type') ?? '') })
      }
    } catch (err) {
      res = (heat ? heatError(clientInputError(err) ?? err) : null) ?? errorResponse(err, (e) => d.log.error(`${req.method} ${url.pathname}: ${e instanceof Error ? e.stack : String(e)}`))
    }
    // Paths only: query strings and bodies may carry values that must not reach logs.
    d.log.debug(`${req.method} ${url.pathname} ${res.status} ${Date.now() - started}ms`)
    return res
  }
}
