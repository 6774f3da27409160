/**
 * Where a node's properties are evaluated (lib/evaluation/bounded.ts): an
 * ordinary node on the worker's own thread, with no thread hop; a node whose
 * evaluation spends the small inline allowance on an evaluation thread.
 */
import { expect, test } from 'vitest'
import { chain, runtimeBombs } from '../../bench/bomb-templates'
import { runNode } from '../../lib/engine/check-resource'
import { configureEvaluation } from '../../lib/evaluation/pool'
import { DEFAULT_EVALUATION_SETTINGS } from '../../lib/evaluation/settings'
import type { TestCluster } from '../helpers/cluster'
import { inProcessWorker } from '../helpers/in-process-worker'
import { workerlessCluster } from '../helpers/workerless'

let c: TestCluster
workerlessCluster((_d, cl) => (c = cl))

test('an ordinary node is evaluated on the calling thread; one that spends the inline allowance moves to an evaluation thread', { timeout: 60_000 }, async () => {
  const kinds: string[] = []
  configureEvaluation(DEFAULT_EVALUATION_SETTINGS, { started: (k) => kinds.push(k) })
  try {
    const w = await inProcessWorker(c, { inline: true })
    const run = async (name: string, template: string) => {
      const { stack } = await c.services.create(c.actor, { name, template })
      const todo = [await w.claim()]
      for (;;) {
        while (todo.length) todo.push(...(await runNode(w.deps, todo.shift()!)).next)
        const queued = await w.claimQueued(8)
        if (!queued.length) break
        todo.push(...queued)
      }
      return c.settle(stack.id)
    }
    // The submission itself is checked on a thread; the nodes of a plain chain are not.
    expect(await run('plain', chain(5))).toBe('CREATE_COMPLETE')
    expect(kinds).toEqual(['submission'])
    kinds.length = 0
    expect(await run('heavy', runtimeBombs(20_000, { bomb: false }))).toBe('CREATE_COMPLETE')
    expect(kinds).toEqual(['submission', 'properties'])
  } finally {
    configureEvaluation(DEFAULT_EVALUATION_SETTINGS)
  }
})
