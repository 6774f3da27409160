/**
 * A stack's resources: their rows (one by id), the workers holding their
 * locks, a signal to a wait condition, the latest drift check, and the
 * snapshots deleted resources kept (also across the project).
 */
import { UUID } from '../../ids'
import type { Principal } from '../../services/accounts'
import { signalFrom, type SignalService } from '../../services/signals'
import { actorOf, type ApiDeps } from '../deps'
import { HttpError, json, parse, type Router } from '../http'
import { SignalBody } from '../schemas'
import { rowId, snapshotName } from './shared'

const MAX_WORKER_IDS = 100

export function resourceRoutes(d: ApiDeps, router: Router<Principal>, signals: SignalService): void {
  router
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
}
