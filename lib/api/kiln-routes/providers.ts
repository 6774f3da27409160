/** HTTP resource providers: registered, listed, refreshed and removed; and their callbacks. */
import type { Principal } from '../../services/accounts'
import { HttpError, json, parse, type Router } from '../http'
import type { ApiDeps } from '../deps'
import { ProviderBody } from '../schemas'

const scopeOf = (url: URL) => {
  const s = url.searchParams.get('scope')
  if (s !== null && s !== 'project' && s !== 'global') throw new HttpError(400, 'invalid_query', 'scope: project or global')
  return s ?? undefined
}

export function providerRoutes(d: ApiDeps, router: Router<Principal>): void {
  router
    .add('GET', '/api/providers', async (c) => json({ providers: await d.providers.list(c.principal) }))
    .add('POST', '/api/providers', async (c) => {
      const body = parse(ProviderBody, await c.json())
      return json(await d.providers.register(c.principal, body), 201)
    })
    .add('POST', '/api/providers/:provider/refresh', async (c) => json({ provider: await d.providers.refresh(c.principal, c.params.provider!, scopeOf(c.url)) }))
    .add('DELETE', '/api/providers/:provider', async (c) => {
      await d.providers.remove(c.principal, c.params.provider!, scopeOf(c.url))
      return json(null, 204)
    })
    .add(
      'POST',
      '/api/provider-callbacks/:stack/:resource',
      async (c) => {
        const sig = c.url.searchParams.get('sig') ?? ''
        return json(await d.providers.callback(c.params.stack!, c.params.resource!, sig), 202)
      },
      { public: true },
    )
}
