/** A stack's outputs: a sensitive one's value is shown only when asked for by name with reveal=true. */
import type { Principal } from '../../services/accounts'
import { actorOf, type ApiDeps } from '../deps'
import { boolParam, json, type Router } from '../http'

export function outputRoutes(d: ApiDeps, router: Router<Principal>): void {
  router
    .add('GET', '/api/stacks/:stack/outputs', async (c) => json({ outputs: await d.reads.outputs(actorOf(c.principal), c.params.stack!) }))
    // A sensitive output's value is shown only here, asked for by name with reveal=true.
    .add('GET', '/api/stacks/:stack/outputs/:key', async (c) => {
      const reveal = boolParam(c.url.searchParams.get('reveal'), 'reveal')
      return json({ output: { key: c.params.key!, ...(await d.reads.output(actorOf(c.principal), c.params.stack!, c.params.key!, { reveal })) } })
    })
}
