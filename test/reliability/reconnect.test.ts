/**
 * PostgreSQL stopped for longer than the first reconnect back-off steps, then
 * started again: the worker LISTENs again and runs work submitted after the
 * restart; the event bridge LISTENs again and pushes events live; and events
 * whose numbers a crash gave out again while the bridge was away make it tell
 * the room to refetch. On a PostgreSQL of this file's own (restarted).
 */
import { afterAll, beforeAll, expect, test } from 'vitest'
import { withRetry } from '../../lib/db/retry'
import { TestCluster } from '../helpers/cluster'
import { ownPostgres, type OwnPostgres } from '../helpers/own-postgres'
import { recordingBridge, seqsOf } from '../helpers/recording-bridge'
import { tcpProxy } from '../helpers/tcp-proxy'

// No worker runs until the last test: a stack the bridge tests create stays queued, so the
// only events of its room are the ones the test writes.
let pg: OwnPostgres
let c: TestCluster
beforeAll(async () => {
  pg = await ownPostgres('reconnect')
  c = await TestCluster.start(pg.url, { workers: 0 })
}, 60_000)
afterAll(async () => {
  await c?.stop()
  await pg?.stop()
})

/** Longer than the first back-off steps (100, 200, 400, 800 ms, jittered), shorter than a lease's worth of patience. */
const OUTAGE_MS = 2500
const ONE_NODE = 'heat_template_version: 2018-08-31\nresources:\n  a: {type: OS::Heat::None}\n'

/** The first calls after a restart may meet pooled connections the restart closed. */
const afterRestart = <T>(fn: () => Promise<T>) => withRetry(fn, { maxMs: 30_000, minDelayMs: 100, maxDelayMs: 1000 })

const sessions = async (application: string) =>
  Number((await c.db.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1`, [application]).catch(() => ({ rows: [{ n: -1 }] }))).rows[0].n)

const emit = (stackId: string, reasons: string[]) =>
  afterRestart(() => c.db.pool.query('SELECT kiln_emit($1, $2)', [stackId, JSON.stringify(reasons.map((reason) => ({ kind: 'node', resource_name: 'x', reason, data: {} })))]))

test('the event bridge LISTENs again after PostgreSQL was down for seconds, and pushes events live', { timeout: 120_000 }, async () => {
  const stack = await afterRestart(() => c.services.create(c.actor, { name: 'bridge-live', template: ONE_NODE }))
  const stackId = stack.stack.id
  const { bridge, sent, until } = recordingBridge({ url: pg.url, pool: c.db.pool })
  try {
    await c.waitFor(async () => (await sessions('kiln-web-events')) === 1, 30_000, 'the bridge to LISTEN', 50)
    const m = await bridge.track(stackId)
    await emit(stackId, ['before'])
    await until(() => seqsOf(sent, stackId).length === 1, 'the event before the restart')

    await pg.restart(OUTAGE_MS)
    await c.waitFor(async () => (await sessions('kiln-web-events')) === 1, 60_000, 'the bridge to LISTEN again', 100)
    await emit(stackId, ['after'])
    await until(() => seqsOf(sent, stackId).length === 2, 'the event after the restart')
    expect(seqsOf(sent, stackId)).toEqual([`${m + 1}:before`, `${m + 2}:after`])
    expect(sent.filter((x) => x.event === 'stack:resync')).toEqual([])
  } finally {
    await bridge.close()
  }
})

test('numbers a crash gave out again while the bridge was away, beyond the last one it sent: the room is told to refetch from what survived', { timeout: 120_000 }, async () => {
  const stack = await afterRestart(() => c.services.create(c.actor, { name: 'bridge-renumbered', template: ONE_NODE }))
  const stackId = stack.stack.id
  // The bridge LISTENs through a proxy that keeps it away until the re-run is written.
  const proxy = await tcpProxy(pg.url)
  const { bridge, sent, until, untilLog } = recordingBridge({ url: proxy.url, pool: c.db.pool })
  try {
    await c.waitFor(async () => (await sessions('kiln-web-events')) === 1, 30_000, 'the bridge to LISTEN', 50)
    const m = await bridge.track(stackId)
    await emit(stackId, ['one', 'two', 'three'])
    await until(() => seqsOf(sent, stackId).length === 3, 'three events')

    proxy.refuse()
    await untilLog(/LISTEN connection lost/, 'the bridge to see its connection go')
    await pg.restart(300)
    // The crash took the last two steps; their re-run (and one more step) numbered its events
    // from there, past the last number the bridge sent, before the bridge was back.
    await afterRestart(() => c.db.pool.query('DELETE FROM event WHERE stack_id = $1 AND seq > $2', [stackId, m + 1]))
    await emit(stackId, ['two again', 'three again', 'four'])
    proxy.accept()

    const resync = await until((x) => x.event === 'stack:resync', 'a resync')
    expect(resync).toMatchObject({ room: `stack:${stackId}`, payload: { stackId, lastSeq: m + 1 } })
    await until(() => seqsOf(sent, stackId).includes(`${m + 4}:four`), 'the re-run events')
    // What was pushed after the resync is the database's truth from the last surviving number on.
    const afterResync = sent.slice(sent.indexOf(resync))
    expect(seqsOf(afterResync, stackId)).toEqual([`${m + 2}:two again`, `${m + 3}:three again`, `${m + 4}:four`])
  } finally {
    await bridge.close()
    await proxy.close()
  }
})

test('a worker LISTENs again after PostgreSQL was down for seconds, and runs a stack created after the restart', { timeout: 120_000 }, async () => {
  // The idle-claim safety net is set out of reach: only the LISTEN connection's return can bring this claim.
  const w = c.spawnWorker({ KILN_IDLE_CLAIM_MS: '3600000' })
  await c.waitFor(async () => w.id !== null, 30_000, 'the worker to start', 100)
  const before = await afterRestart(() => c.services.create(c.actor, { name: 'before-restart', template: ONE_NODE }))
  expect(await c.settle(before.stack.id)).toBe('CREATE_COMPLETE')

  await pg.restart(OUTAGE_MS)
  await c.waitFor(async () => (await sessions('kiln-worker-listen')) === 1, 60_000, 'the worker to LISTEN again', 100)
  const after = await afterRestart(() => c.services.create(c.actor, { name: 'after-restart', template: ONE_NODE }))
  expect(await c.settle(after.stack.id)).toBe('CREATE_COMPLETE')

  const out = w.output.join('')
  // One outage, logged when it began and when it ended, not once per attempt.
  expect(out.match(/worker: LISTEN connection (lost|back)/g)).toEqual(['worker: LISTEN connection lost', 'worker: LISTEN connection back'])
  expect(w.proc.exitCode).toBeNull()
})
