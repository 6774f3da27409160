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

test('events gathered per item for several stacks are published per stack in item order (kiln_events_by_stack)', async () => {
  const a = (await c.services.create(c.actor, { name: 'gathered-a', template: 'heat_template_version: 2018-08-31\nresources: {}\n' })).stack.id
  const b = (await c.services.create(c.actor, { name: 'gathered-b', template: 'heat_template_version: 2018-08-31\nresources: {}\n' })).stack.id
  const evs = (...reasons: string[]) => JSON.stringify(reasons.map((r) => ({ kind: 'progress', resource_name: 'r', reason: r })))
  // Items as a claim or a batch of finishes gathers them: a, b, a (one with no events), b.
  const { rows } = await c.db.pool.query(`SELECT kiln_events_by_stack($1::uuid[], $2::jsonb[]) AS by`, [
    [a, b, a, a, b],
    [evs('a1', 'a2'), evs('b1'), evs('a3'), evs(), evs('b2', 'b3')],
  ])
  expect(rows[0].by).toEqual({ [a]: JSON.parse(evs('a1', 'a2', 'a3')), [b]: JSON.parse(evs('b1', 'b2', 'b3')) })
  const last = async (id: string) => Number((await c.db.pool.query('SELECT kiln_last_seq($1) AS n', [id])).rows[0].n)
  const [la, lb] = [await last(a), await last(b)]
  await c.db.pool.query('SELECT kiln_emit_each($1)', [rows[0].by])
  const reasons = async (id: string, after: number) =>
    (await c.db.pool.query('SELECT seq::int, reason FROM event WHERE stack_id = $1 AND seq > $2 ORDER BY seq', [id, after])).rows
  expect(await reasons(a, la)).toEqual([{ seq: la + 1, reason: 'a1' }, { seq: la + 2, reason: 'a2' }, { seq: la + 3, reason: 'a3' }])
  expect(await reasons(b, lb)).toEqual([{ seq: lb + 1, reason: 'b1' }, { seq: lb + 2, reason: 'b2' }, { seq: lb + 3, reason: 'b3' }])
  expect((await c.db.pool.query(`SELECT kiln_events_by_stack('{}', '{}') AS by`)).rows[0].by).toEqual({})
})

test("an event's time is when it is numbered, not when its transaction began: times follow the numbers", async () => {
  const id = (await c.services.create(c.actor, { name: 'event-times', template: 'heat_template_version: 2018-08-31\nresources: {}\n' })).stack.id
  const emit = (reason: string) => `SELECT kiln_emit($1, jsonb_build_array(kiln_ev('progress', NULL, NULL, 'r', NULL, NULL, NULL, '${reason}', NULL)))`
  const early = await c.db.pool.connect()
  const late = await c.db.pool.connect()
  try {
    // `early` begins first; `late` begins, numbers its event and commits while `early` is still open.
    await early.query('BEGIN')
    const began = (await early.query(`SELECT now() AS t`)).rows[0].t as Date
    // The clock moves on before `late` numbers (times are stored to the millisecond).
    while (!(await late.query(`SELECT clock_timestamp() > $1::timestamptz + interval '2 milliseconds' AS past`, [began])).rows[0].past);
    await late.query(emit('late'), [id])
    await early.query(emit('early'), [id])
    await early.query('COMMIT')
    const { rows } = await c.db.pool.query(`SELECT reason, seq::int, created_at FROM event WHERE stack_id = $1 AND reason IN ('early', 'late') ORDER BY seq`, [id])
    expect(rows.map((r) => r.reason)).toEqual(['late', 'early'])
    // Numbered after `late`, so timed after it, though its transaction began before.
    expect(rows[1].created_at.getTime()).toBeGreaterThanOrEqual(rows[0].created_at.getTime())
    expect(rows[1].created_at.getTime()).toBeGreaterThan(began.getTime())
  } finally {
    await early.query('ROLLBACK').catch(() => {})
    early.release()
    late.release()
  }
})
