/** Heat's stack outputs: the list (keys and descriptions), and one output by name. */
import { NotFoundError } from '../../plan/errors'
import type { Principal } from '../../services/accounts'
import { actorOf, type ApiDeps } from '../deps'
import { HttpError, json, type Router } from '../http'
import { identified } from './common'

export function outputRoutes(d: ApiDeps, router: Router<Principal>): void {
  router
    .add('GET', '/v1/:project/stacks/:name/:id/outputs', async (c) => {
      const s = await identified(d, c)
      const outs = await d.reads.outputs(actorOf(c.principal), String(s.id))
      return json({ outputs: Object.entries(outs).map(([k, o]) => ({ output_key: k, description: o.description ?? 'No description given' })) })
    })
    .add('GET', '/v1/:project/stacks/:name/:id/outputs/:key', async (c) => {
      const s = await identified(d, c)
      // `openstack stack output show` names the output: an explicit request, so a sensitive one is shown.
      const o = await d.reads.output(actorOf(c.principal), String(s.id), c.params.key!, { reveal: true }).catch((err: unknown) => {
        if (err instanceof NotFoundError) throw new HttpError(404, 'not_found', `Specified output key ${c.params.key} not found.`)
        throw err
      })
      return json({ output: { output_key: c.params.key, output_value: o.value, description: o.description ?? 'No description given', ...(o.error ? { output_error: o.error } : {}) } })
    })
}
