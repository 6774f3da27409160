/**
 * The event bridge (PostgreSQL NOTIFY -> Socket.IO rooms) against a real
 * database: events are pushed in order, and after a database crash that lost
 * lazily committed steps (their event numbers will be handed out again) the
 * bridge tells the room to refetch and serves the reused numbers. Steps
 * notify only for watched stacks, and a watch taken while a step numbers
 * events counts that step in.
 */
import pg from 'pg'
import { expect, test } from 'vitest'
import { ALL_STACKS, HARNESS_WATCH_MS, watchStackEvents } from '../../lib/db/queries/watch'
import type { TestCluster } from '../helpers/cluster'
import type { TestDatabase } from '../helpers/db'
import { recordingBridge, seqsOf } from '../helpers/recording-bridge'
import { tcpProxy } from '../helpers/tcp-proxy'
import { workerlessCluster } from '../helpers/workerless'

let db: TestDatabase
let c: TestCluster
workerlessCluster((d, cl) => ((db = d), (c = cl)))

/** A bridge whose rooms are all watched, LISTENing on this file's database (or through `url`). */
const recording = (url = db.url) => recordingBridge({ url, pool: c.db.pool })

const emit = (stackId: string, reasons: string[]) =>
  c.db.pool.query('SELECT kiln_emit($1, $2)', [stackId, JSON.stringify(reasons.map((reason) => ({ kind: 'node', resource_name: 'x', reason, data: {} })))])

test('after a crash lost steps, the room is told to refetch and the reused numbers are served', async () => {
  const res = await c.services.create(c.actor, { name: 'bridge-rewind', template: 'heat_template_version: 2018-08-31\nresources:\n  x: {type: OS::Heat::None}\n' })
  const stackId = res.stack.id
  const { bridge, sent, until } = recording()
  try {
    // The LISTEN connection is opened in the background; track() reads through the pool.
    await c.waitFor(async () => (await c.db.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'kiln-web-events' AND datname = current_database()`)).rows[0].n === 1, 10_000, 'the bridge to LISTEN', 50)
    const m = await bridge.track(stackId)
    await emit(stackId, ['one', 'two', 'three'])
    await until(() => seqsOf(sent, stackId).length === 3, 'three events')
    expect(seqsOf(sent, stackId)).toEqual([`${m + 1}:one`, `${m + 2}:two`, `${m + 3}:three`])

    // A crash lost the last two steps (committed without waiting for the disk), and the bridge's connection with them.
    await c.db.pool.query('DELETE FROM event WHERE stack_id = $1 AND seq > $2', [stackId, m + 1])
    await c.db.pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'kiln-web-events' AND datname = current_database()`)
    const resync = await until((s) => s.event === 'stack:resync', 'a resync')
    expect(resync).toMatchObject({ room: `stack:${stackId}`, payload: { stackId, lastSeq: m + 1 } })

    // The re-run's events reuse the lost numbers, and reach the room.
    await emit(stackId, ['two again'])
    await until(() => seqsOf(sent, stackId).includes(`${m + 2}:two again`), 'the re-run event')
  } finally {
    await bridge.close()
  }
})

test('events written while the LISTEN connection cannot come back reach the room when it does: once each, in order', async () => {
  const res = await c.services.create(c.actor, { name: 'bridge-outage', template: 'heat_template_version: 2018-08-31\nresources:\n  x: {type: OS::Heat::None}\n' })
  const stackId = res.stack.id
  // The bridge LISTENs through a proxy that can refuse it; its reads (the pool) go straight to the database.
  const proxy = await tcpProxy(db.url)
  const { bridge, sent, logs, until, untilLog } = recording(proxy.url)
  try {
    await c.waitFor(async () => (await c.db.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'kiln-web-events' AND datname = current_database()`)).rows[0].n === 1, 10_000, 'the bridge to LISTEN', 50)
    const m = await bridge.track(stackId)
    await emit(stackId, ['before'])
    await until(() => seqsOf(sent, stackId).length === 1, 'the first event')

    proxy.refuse()
    await untilLog(/event bridge: LISTEN connection lost/, 'the bridge to see its connection go')
    await emit(stackId, ['while down 1'])
    await emit(stackId, ['while down 2'])
    // Longer than the first back-off steps: the third attempt to reconnect has failed too.
    await untilLog(/reconnect attempt 3 failed/, 'three failed reconnect attempts')
    proxy.accept()

    await until(() => seqsOf(sent, stackId).length === 3, 'the events written while the connection was down')
    await emit(stackId, ['after'])
    await until(() => seqsOf(sent, stackId).length === 4, 'a live event after the outage')
    expect(seqsOf(sent, stackId)).toEqual([`${m + 1}:before`, `${m + 2}:while down 1`, `${m + 3}:while down 2`, `${m + 4}:after`])
    expect(sent.filter((x) => x.event === 'stack:resync')).toEqual([])
    // One outage, logged when it began and when it ended, not once per attempt.
    expect(logs.filter((l) => / WARN .*LISTEN connection (lost|back)/.test(l)).map((l) => l.replace(/.*LISTEN connection (\w+).*/, '$1'))).toEqual(['lost', 'back'])
  } finally {
    await bridge.close()
    await proxy.close()
  }
})

/** A LISTEN kiln_events connection; `drain()` returns what arrived up to a marker sent now (delivery follows commit order). */
async function eventListener() {
  const client = new pg.Client({ connectionString: db.url })
  const got: string[] = []
  let wake = () => {}
  client.on('notification', (m) => {
    got.push(m.payload ?? '')
    wake()
  })
  await client.connect()
  await client.query('LISTEN kiln_events')
  const until = async (payload: string) => {
    // Timer reason: fail rather than hang if it never comes.
    const deadline = Date.now() + 10_000
    while (!got.includes(payload)) {
      if (Date.now() > deadline) throw new Error(`no NOTIFY ${payload}; got ${JSON.stringify(got)}`)
      await new Promise<void>((r) => {
        wake = r
        setTimeout(r, 1000)
      })
    }
  }
  return {
    async drain(): Promise<string[]> {
      const marker = `marker-${got.length}-${Math.random()}`
      await c.db.pool.query(`SELECT pg_notify('kiln_events', $1)`, [marker])
      await until(marker)
      return got.splice(0).filter((p) => p !== marker)
    },
    until,
    close: () => client.end(),
  }
}

test('a step notifies only for a watched stack; a watch taken while a step numbers events waits for it and counts it in', async () => {
  const res = await c.services.create(c.actor, { name: 'bridge-watch', template: 'heat_template_version: 2018-08-31\nresources:\n  x: {type: OS::Heat::None}\n' })
  const stackId = res.stack.id
  // This file's cluster follows every stack; take that away for the test.
  await c.db.pool.query(`DELETE FROM event_watch`)
  const listener = await eventListener()
  const stepper = new pg.Client({ connectionString: db.url })
  await stepper.connect()
  try {
    await emit(stackId, ['nobody watches'])
    expect(await listener.drain()).toEqual([])

    // A step numbers events (holding the stack's event lock) before anybody watches: it will not notify.
    await stepper.query('BEGIN')
    await stepper.query('SELECT kiln_emit($1, $2)', [stackId, JSON.stringify([{ kind: 'node', resource_name: 'x', reason: 'in flight', data: {} }])])
    const watching = watchStackEvents(c.db.pool, crypto.randomUUID(), [stackId], 60_000)
    await c.waitFor(
      async () => (await c.db.pool.query(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`)).rows[0].n === 1,
      10_000,
      'the watch to wait for the step',
      20,
    )
    await stepper.query('COMMIT')
    const seqs = await watching
    const last = Number((await c.db.pool.query(`SELECT max(seq) AS m FROM event WHERE stack_id = $1`, [stackId])).rows[0].m)
    // The number returned covers the step that did not notify: a subscriber fetches it over REST.
    expect(seqs.get(stackId)).toBe(last)
    expect(await listener.drain()).toEqual([])

    await emit(stackId, ['watched'])
    expect(await listener.drain()).toEqual([stackId])

    // A watch that ran out is no watch.
    await c.db.pool.query(`UPDATE event_watch SET expires_at = now() - interval '1 second'`)
    await emit(stackId, ['lapsed'])
    expect(await listener.drain()).toEqual([])

    // The bridge watches what it serves.
    const { bridge, sent, until } = recording()
    try {
      await c.waitFor(async () => (await c.db.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'kiln-web-events' AND datname = current_database()`)).rows[0].n === 1, 10_000, 'the bridge to LISTEN', 50)
      const m = await bridge.track(stackId)
      expect(m).toBe(last + 2)
      await emit(stackId, ['served'])
      await until(() => seqsOf(sent, stackId).includes(`${m + 1}:served`), 'the served event')
      expect(await listener.drain()).toEqual([stackId])
    } finally {
      await bridge.close()
    }
  } finally {
    await stepper.end()
    await listener.close()
    await watchStackEvents(c.db.pool, c.watcher, [ALL_STACKS], HARNESS_WATCH_MS)
  }
})
