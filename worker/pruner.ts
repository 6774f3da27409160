/** The event history limit (KILN_MAX_EVENTS_PER_STACK), enforced once a minute rather than on every write. */
import { pruneEvents } from '../lib/db/queries/workers'
import type { WorkerResources } from './resources'

const PRUNE_EVERY_MS = 60_000

export class EventPruner {
  constructor(private readonly resources: WorkerResources) {}

  start(): void {
    const { db, log, settings, timers } = this.resources
    const keep = settings.maxEventsPerStack
    if (!keep) return
    timers.every(PRUNE_EVERY_MS, async () => {
      const n = await pruneEvents(db.pool, keep)
      if (n) log.info(`pruned ${n} event(s) beyond ${keep} per stack`)
    })
  }
}
