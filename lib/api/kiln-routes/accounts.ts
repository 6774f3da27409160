/** The browser's session (login with a token), the project's tokens, and new projects. */
import type { Principal } from '../../services/accounts'
import type { ApiDeps } from '../deps'
import { HttpError, json, parse, sessionCookie, tooManyAttempts, type Router } from '../http'
import { LoginBody, ProjectBody, TokenBody } from '../schemas'
import { uuid } from './shared'

export function accountRoutes(d: ApiDeps, router: Router<Principal>): void {
  router
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
}
