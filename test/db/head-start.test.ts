/**
 * Head starts (lib/engine/check-resource.ts): when an update node must replace
 * its row, a state-only type's create starts at once, as the new row, while
 * the replace call that inserts and locks that row is in flight; the new row's
 * node run adopts it. A type with effects outside Kiln still acts only after
 * the call. The engine runs in this process against the real store, so the
 * order of the call and the create can be observed.
 */
import { expect, test } from 'vitest'
import { physicalName, runNode } from '../../lib/engine/check-resource'
import type { ClaimedJob, ConvergenceStore } from '../../lib/engine/ports'
import { builtinTypes, createRegistry } from '../../lib/resources/registry'
import type { ResourceType } from '../../lib/resources/types'
import type { TestCluster } from '../helpers/cluster'
import { inProcessWorker } from '../helpers/in-process-worker'
import { workerlessCluster } from '../helpers/workerless'

let c: TestCluster
workerlessCluster((_d, cl) => (c = cl))

const hot = (resources: Record<string, unknown>) => JSON.stringify({ heat_template_version: '2018-08-31', resources })
const test1 = (value: string) => ({ type: 'OS::Heat::TestResource', properties: { value, update_replace: true, wait_secs: 0.1 } })
const file = (p: string) => ({ type: 'Kiln::File', properties: { path: p, content: 'x' } })

/** A worker of this process whose creates and replace calls are written down, in order, in `log`. */
async function recordingWorker(override: Partial<ConvergenceStore> = {}) {
  const log: string[] = []
  const aborts: string[] = []
  const registry = createRegistry(builtinTypes())
  const recorded = (t: ResourceType): ResourceType => ({
    ...t,
    async create(ctx, props) {
      log.push(`create ${ctx.resourceUuid}`)
      ctx.signal.addEventListener('abort', () => aborts.push(String((ctx.signal.reason as Error).message)))
      return t.create(ctx, props)
    },
  })
  const w = await inProcessWorker(c, {
    inline: true,
    types: { get: (name) => (registry.get(name) ? recorded(registry.get(name)!) : undefined) },
    store: (real) => ({
      replaceNode: async (job, req) => {
        log.push('replace call')
        const res = await (override.replaceNode ?? real.replaceNode)(job, req)
        log.push(`replace answered ${res.outcome}`)
        return res
      },
    }),
  })
  /** Run a job and every job it hands on, then whatever is queued, until the stack settles. */
  const drain = async (stackId: string, first: ClaimedJob[]) => {
    const todo = [...first]
    for (;;) {
      while (todo.length) todo.push(...(await runNode(w.deps, todo.shift()!)).next)
      const queued = await w.claimQueued(8)
      if (!queued.length) break
      todo.push(...queued)
    }
    return c.settle(stackId)
  }
  return { deps: w.deps, claim: w.claim, drain, log, aborts }
}

const liveRows = async (stackId: string) =>
  (await c.db.pool.query(`SELECT name, uuid, physical_id FROM resource WHERE stack_id = $1 AND NOT (action = 'DELETE' AND status = 'COMPLETE') ORDER BY id`, [stackId])).rows

test("a state-only replacement's create starts before the replace call answers, and runs once", { timeout: 60_000 }, async () => {
  const w = await recordingWorker()
  const { stack } = await c.services.create(c.actor, { name: 'head-start', template: hot({ r: test1('a') }) })
  expect(await w.drain(stack.id, [await w.claim()])).toBe('CREATE_COMPLETE')
  w.log.length = 0

  await c.services.update(c.actor, stack.id, { template: hot({ r: test1('b') }) })
  const replaced = await runNode(w.deps, await w.claim())
  expect(replaced.outcome).toBe('replaced')
  const [next] = replaced.next
  expect(next?.headStart).toBeDefined()
  const uuid = next!.headStart!.uuid
  expect(w.log).toEqual([`create ${uuid}`, 'replace call', 'replace answered ok'])

  expect(await w.drain(stack.id, replaced.next)).toBe('UPDATE_COMPLETE')
  // Adopted, not run again; the new row is the one the create ran as.
  expect(w.log.filter((l) => l.startsWith('create'))).toEqual([`create ${uuid}`])
  expect(await liveRows(stack.id)).toEqual([{ name: 'r', uuid, physical_id: physicalName('head-start', { name: 'r', uuid }) }])
  expect(w.aborts).toEqual([])
})

test('a replacement with effects outside Kiln acts only after the replace call', { timeout: 60_000 }, async () => {
  const w = await recordingWorker()
  const { stack } = await c.services.create(c.actor, { name: 'no-head-start', template: hot({ f: file('hs/a.txt') }) })
  expect(await w.drain(stack.id, [await w.claim()])).toBe('CREATE_COMPLETE')
  w.log.length = 0

  await c.services.update(c.actor, stack.id, { template: hot({ f: file('hs/b.txt') }) })
  const replaced = await runNode(w.deps, await w.claim())
  expect(replaced.outcome).toBe('replaced')
  expect(replaced.next[0]?.headStart).toBeUndefined()
  expect(w.log).toEqual(['replace call', 'replace answered ok'])
  expect(await w.drain(stack.id, replaced.next)).toBe('UPDATE_COMPLETE')
  const [row] = await liveRows(stack.id)
  expect(w.log).toEqual(['replace call', 'replace answered ok', `create ${row.uuid}`])
})

test('a head start whose replace call does not hand over the row is aborted and dropped', { timeout: 60_000 }, async () => {
  const w = await recordingWorker({ replaceNode: async () => ({ outcome: 'stale' }) })
  const { stack } = await c.services.create(c.actor, { name: 'head-start-dropped', template: hot({ r: test1('a') }) })
  expect(await w.drain(stack.id, [await w.claim()])).toBe('CREATE_COMPLETE')
  w.log.length = 0

  await c.services.update(c.actor, stack.id, { template: hot({ r: test1('b') }) })
  const res = await runNode(w.deps, await w.claim())
  expect(res).toEqual({ outcome: 'stale', next: [] })
  expect(w.log).toEqual([expect.stringMatching(/^create /), 'replace call', 'replace answered stale'])
  expect(w.aborts).toEqual(['the replace call answered stale'])
  // Nothing of it was stored: the only row is the old one, as it was.
  expect(await liveRows(stack.id)).toMatchObject([{ name: 'r', physical_id: expect.stringMatching(/^head-start-dropped-r-/) }])
})
