/**
 * Parking's two races, placed exactly with a worker of the test's own process
 * (lib/db/functions/25_park.sql):
 *   - a signal stored after the wait condition looked at its signals and
 *     before it parked wakes it all the same: the park answers 'again' and the
 *     node looks again, instead of sleeping until its timeout;
 *   - a stack delete that comes while the action runs, before it parks (its
 *     NOTIFY kiln_abort reached no action that listened), stops it: the park
 *     answers 'aborted', the node fails, and the delete's node is retriggered.
 */
import { expect, test } from 'vitest'
import { runNode } from '../../lib/engine/check-resource'
import type { ConvergenceStore } from '../../lib/engine/ports'
import type { TestCluster } from '../helpers/cluster'
import type { TestDatabase } from '../helpers/db'
import { gateResources, openGate } from '../helpers/gate'
import { inProcessWorker } from '../helpers/in-process-worker'
import { workerlessCluster } from '../helpers/workerless'

let c: TestCluster
workerlessCluster((_d: TestDatabase, cl) => (c = cl))

const template = { heat_template_version: '2018-08-31', resources: gateResources('gate') }

async function events(stackId: string): Promise<string[]> {
  const { rows } = await c.db.pool.query(`SELECT reason FROM event WHERE stack_id = $1 ORDER BY seq`, [stackId])
  return rows.map((r) => r.reason as string)
}

/** Run the handle's node, then claim the gate's job (the test runs it). */
async function upToTheGate(w: Awaited<ReturnType<typeof inProcessWorker>>) {
  const handle = await w.claim()
  expect((await runNode(w.deps, handle)).outcome).toBe('created')
  return w.claim()
}

test('a signal stored between the look and the park is not slept through: the node looks again', async () => {
  const { stack } = await c.services.create(c.actor, { name: 'wake-race', template })
  let sent = false
  const w = await inProcessWorker(c, {
    store: (real): Partial<ConvergenceStore> => ({
      signals: {
        ...real.signals,
        read: async (stackId, handle) => {
          const seen = await real.signals.read(stackId, handle)
          // Stored after the look, before the park: the look saw no signal.
          if (!sent) {
            sent = true
            expect(seen.signals).toEqual([])
            await openGate(c, stack.id)
          }
          return seen
        },
      },
    }),
  })
  const gate = await upToTheGate(w)
  const res = await runNode(w.deps, gate)
  expect(sent).toBe(true)
  expect(res.outcome).toBe('created')
  expect((await events(stack.id)).some((r) => r.startsWith('parked'))).toBe(false)
})

test('a delete that comes while the action runs, before it parks, stops it: the park answers the abort', async () => {
  const { stack } = await c.services.create(c.actor, { name: 'abort-race', template })
  let deleted = false
  const w = await inProcessWorker(c, {
    store: (real): Partial<ConvergenceStore> => ({
      parkNode: async (job, req) => {
        // The delete's NOTIFY kiln_abort goes to workers' running actions; this one is not listening.
        if (!deleted) {
          deleted = true
          await c.services.delete(c.actor, stack.id)
          // The delete's node for the gate's row finds it locked and waits to be handed over.
          const other = await inProcessWorker(c)
          const outcomes = await Promise.all((await other.claimQueued(10)).map(async (j) => (await runNode(other.deps, j)).outcome))
          expect(outcomes).toEqual(['blocked'])
        }
        return real.parkNode(job, req)
      },
    }),
  })
  const gate = await upToTheGate(w)
  const res = await runNode(w.deps, gate)
  expect(deleted).toBe(true)
  expect(res.outcome).toBe('failed')
  const { rows } = await c.db.pool.query(`SELECT status, status_reason, engine_id FROM resource WHERE stack_id = $1 AND name = 'gate'`, [stack.id])
  expect(rows[0]).toEqual({ status: 'FAILED', status_reason: 'CREATE aborted (stack delete requested)', engine_id: null })
  // The delete's cleanup node, blocked by the gate's row, was handed over.
  expect(await events(stack.id)).toContain('retriggered: the older traversal released the lock')
})
