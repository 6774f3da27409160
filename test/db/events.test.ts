/** The event history limit (KILN_MAX_EVENTS_PER_STACK): the oldest events go, what is left stays gap-free. */
import { expect, test } from 'vitest'
import { pruneEvents } from '../../lib/db/queries/workers'
import type { TestCluster } from '../helpers/cluster'
import { workerlessCluster } from '../helpers/workerless'

let c: TestCluster
workerlessCluster((_db, cl) => (c = cl))

test('pruneEvents keeps the newest N events of each stack over the limit, contiguous, and leaves others alone', async () => {
  const big = (await c.services.create(c.actor, { name: 'many-events', template: 'heat_template_version: 2018-08-31\nresources: {}\n' })).stack.id
  const small = (await c.services.create(c.actor, { name: 'few-events', template: 'heat_template_version: 2018-08-31\nresources: {}\n' })).stack.id
  const ev = `jsonb_build_array(${Array.from({ length: 40 }, (_, i) => `kiln_ev('progress', NULL, NULL, 'r', NULL, NULL, NULL, 'e${i}', NULL)`).join(', ')})`
  await c.db.pool.query(`SELECT kiln_emit($1, ${ev})`, [big])
  const seq = async (id: string) => (await c.db.pool.query(`SELECT count(*)::int AS n, min(seq)::int AS lo, max(seq)::int AS hi, kiln_last_seq($1)::int AS last FROM event WHERE stack_id = $1`, [id])).rows[0]
  const before = await seq(big)
  const smallBefore = await seq(small)
  expect(before.n).toBeGreaterThan(40)
  const deleted = await pruneEvents(c.db.pool, 25)
  expect(deleted).toBe(before.n - 25)
  const after = await seq(big)
  expect(after).toEqual({ n: 25, lo: before.last - 24, hi: before.last, last: before.last })
  expect(await seq(small)).toEqual(smallBefore)
  expect(await pruneEvents(c.db.pool, 25)).toBe(0)
  // Numbering continues after the pruned ones: a client's position stays valid.
  await c.db.pool.query(`SELECT kiln_emit($1, jsonb_build_array(kiln_ev('progress', NULL, NULL, 'r', NULL, NULL, NULL, 'after', NULL)))`, [big])
  expect(await seq(big)).toEqual({ n: 26, lo: before.last - 24, hi: before.last + 1, last: before.last + 1 })
})
