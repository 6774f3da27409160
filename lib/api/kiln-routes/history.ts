/**
 * A stack's history: its events (a page at a time, of a traversal or of the
 * current one), its traversals and their graphs, the template version each
 * converged to, and a diff between two versions.
 */
import type { Principal } from '../../services/accounts'
import { currentVersion, diffNamed, traversalVersion } from '../../services/versions'
import { actorOf, type ApiDeps } from '../deps'
import { HttpError, intParam, json, type Router } from '../http'
import { uuid } from './shared'

const GRAPH_FORMATS = ['json', 'dot', 'graphml'] as const

export function historyRoutes(d: ApiDeps, router: Router<Principal>): void {
  router
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
}
