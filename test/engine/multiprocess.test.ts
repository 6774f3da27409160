/**
 * The convergence behaviours on the real path: several worker processes
 * against PostgreSQL, resource actions with real delays, updates submitted
 * mid-traversal (repeated), cancel with and without rollback, delete during an
 * update, and a worker killed with SIGKILL while it holds locks.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { testDatabase, type TestDatabase } from '../helpers/db'
import { TestCluster } from '../helpers/cluster'
import { gateHeld, gateResources, openGate } from '../helpers/gate'

let db: TestDatabase
let c: TestCluster

beforeAll(async () => {
  db = await testDatabase()
  c = await TestCluster.start(db.url, { workers: 3, leaseMs: 1500 })
})
afterAll(async () => {
  await c?.stop()
  await db?.drop()
})

/**
 * A chain of TestResources r0 <- r1 <- ... each waiting `wait` seconds on every
 * action; `extra` properties for every node, or per node index.
 */
function chain(n: number, value: string, wait: number, extra: Record<string, unknown> | ((i: number) => Record<string, unknown>) = {}): string {
  const resources: Record<string, unknown> = {}
  for (let i = 0; i < n; i++) {
    resources[`r${i}`] = {
      type: 'OS::Heat::TestResource',
      properties: { value: `${value}-${i}`, wait_secs: wait, ...(typeof extra === 'function' ? extra(i) : extra) },
      ...(i ? { depends_on: [`r${i - 1}`] } : {}),
    }
  }
  return JSON.stringify({ heat_template_version: '2018-08-31', resources })
}

/** Layered: `layers` of `width`, each node needing two of the layer before. */
function layered(layers: number, width: number, value: string, wait: number): string {
  const resources: Record<string, unknown> = {}
  for (let l = 0; l < layers; l++)
    for (let i = 0; i < width; i++) {
      const deps = l ? [...new Set([`n${l - 1}_${i}`, `n${l - 1}_${(i + 1) % width}`])] : []
      resources[`n${l}_${i}`] = { type: 'OS::Heat::TestResource', properties: { value: `${value}-${l}-${i}`, wait_secs: wait }, ...(deps.length ? { depends_on: deps } : {}) }
    }
  return JSON.stringify({ heat_template_version: '2018-08-31', resources })
}

/** `template` (JSON) with a gate (test/helpers/gate.ts) named `name`, after `after` when given. */
function withGate(template: string, count: number, o: { name?: string; after?: string } = {}): string {
  const t = JSON.parse(template) as { resources: Record<string, Record<string, unknown>> }
  const gate = gateResources(o.name, count) as Record<string, Record<string, unknown>>
  if (o.after) gate[o.name ?? 'gate']!.depends_on = [o.after]
  return JSON.stringify({ ...t, resources: { ...t.resources, ...gate } })
}

/** Files f<i>, each followed by a wait condition w<i>; all of them wait at one handle (gate_handle) until the test signals it. */
function files(n: number, content: string, prefix: string): string {
  const resources: Record<string, unknown> = { gate_handle: { type: 'OS::Heat::WaitConditionHandle' } }
  for (let i = 0; i < n; i++) {
    resources[`f${i}`] = { type: 'Kiln::File', properties: { path: `${prefix}/f${i}.txt`, content: `${content}-${i}` } }
    resources[`w${i}`] = { type: 'OS::Heat::WaitCondition', properties: { handle: { get_resource: 'gate_handle' }, count: 1, timeout: 3600 }, depends_on: [`f${i}`] }
  }
  return JSON.stringify({ heat_template_version: '2018-08-31', resources })
}

async function expectNoLocks(stackId: string) {
  const rows = await c.rows(stackId)
  expect(rows.filter((r) => r.engine_id !== null), 'rows still locked').toEqual([])
}

function visibleValues(rows: Awaited<ReturnType<TestCluster['rows']>>) {
  const out: Record<string, unknown> = {}
  for (const r of rows) if (['CREATE', 'UPDATE'].includes(r.action) && r.status === 'COMPLETE') out[r.name] = r.properties?.value
  return out
}

describe('several worker processes', () => {
  test('a layered stack converges', async () => {
    const res = await c.services.create(c.actor, { name: 'layers', template: layered(4, 5, 'a', 0.05) })
    expect(await c.settle(res.stack.id)).toBe('CREATE_COMPLETE')
    const rows = await c.rows(res.stack.id)
    expect(rows).toHaveLength(20)
    expect(rows.every((r) => r.action === 'CREATE' && r.status === 'COMPLETE')).toBe(true)
    await expectNoLocks(res.stack.id)
  })

  test('updates submitted mid-traversal, again and again, end at the last template with no needless replacement', async () => {
    // The chain's actions of 0.25 s against updates 85–210 ms apart overlap however the machine
    // schedules them. Beside the chain, a gate's row is held by the create's wait until the test
    // signals it, so every update's `hold` node finds that row locked (blocked), and the newest is
    // retriggered when the signal lets it go: that much never depends on timing. Each update raises
    // the gate's count, so the newest update's own wait needs one signal per traversal.
    const res = await c.services.create(c.actor, { name: 'overlap', template: withGate(chain(6, 'v0', 0.25), 1, { name: 'hold' }) })
    await gateHeld(c, res.stack.id, 'hold')
    let last = 'v0'
    for (let k = 1; k <= 6; k++) {
      // Timer reason: spreads the updates over the chain's actions (the overlap itself is not asserted).
      await new Promise((r) => setTimeout(r, 60 + k * 25))
      last = `v${k}`
      await c.services.update(c.actor, res.stack.id, { template: withGate(chain(6, last, 0.25), k + 1, { name: 'hold' }) })
    }
    for (let k = 0; k <= 6; k++) await openGate(c, res.stack.id, 'hold')
    expect(await c.settle(res.stack.id)).toBe('UPDATE_COMPLETE')
    const rows = await c.rows(res.stack.id)
    const chainRows = rows.filter((r) => r.name.startsWith('r'))
    expect(visibleValues(chainRows)).toEqual(Object.fromEntries([...Array(6).keys()].map((i) => [`r${i}`, `${last}-${i}`])))
    // value is update_allowed: nothing was replaced, one row per resource.
    expect(rows.filter((r) => r.action !== 'DELETE').map((r) => r.name).sort()).toEqual(['hold', 'hold_handle', 'r0', 'r1', 'r2', 'r3', 'r4', 'r5'])
    await expectNoLocks(res.stack.id)
    // A node of a newer traversal found its row locked by an older one and was retriggered.
    const { rows: ev } = await c.db.pool.query(`SELECT count(*) FILTER (WHERE data->>'state' = 'BLOCKED')::int AS blocked, count(*) FILTER (WHERE (data->>'retriggered')::boolean)::int AS retriggered FROM event WHERE stack_id = $1`, [res.stack.id])
    expect(ev[0].blocked).toBeGreaterThan(0)
    expect(ev[0].retriggered).toBeGreaterThan(0)
  })

  test('an in-place update shows UPDATE_IN_PROGRESS then UPDATE_COMPLETE, whether its action is quick (one transaction) or slow (marked while it runs)', async () => {
    for (const [name, wait] of [['quick', 0], ['slow', 0.2]] as const) {
      const res = await c.services.create(c.actor, { name: `mark-${name}`, template: chain(2, 'a', wait) })
      expect(await c.settle(res.stack.id)).toBe('CREATE_COMPLETE')
      const up = await c.services.update(c.actor, res.stack.id, { template: chain(2, 'b', wait) })
      expect(await c.settle(res.stack.id)).toBe('UPDATE_COMPLETE')
      const { rows } = await c.db.pool.query(
        `SELECT resource_name, action || '_' || status AS state, created_at FROM event WHERE traversal_id = $1 AND kind = 'resource' ORDER BY seq`,
        [up.traversalId],
      )
      for (const r of ['r0', 'r1']) expect(rows.filter((e) => e.resource_name === r).map((e) => e.state), `${name} ${r}`).toEqual(['UPDATE_IN_PROGRESS', 'UPDATE_COMPLETE'])
      // A slow action's IN_PROGRESS is written while it runs, in a transaction of its own.
      const r0 = rows.filter((e) => e.resource_name === 'r0')
      const apart = new Date(r0[1].created_at).getTime() - new Date(r0[0].created_at).getTime()
      if (wait > 0) expect(apart).toBeGreaterThan(100)
      else expect(apart).toBe(0)
    }
  })

  test("an in-place update completes each row's cleanup node with the row's own update, in dependency order, not Heat's reverse; a replaced row's cleanup still runs in a worker", async () => {
    const res = await c.services.create(c.actor, { name: 'cleanup-inline', template: chain(4, 'a', 0) })
    expect(await c.settle(res.stack.id)).toBe('CREATE_COMPLETE')
    const cleanupEvents = async (traversalId: string) =>
      (await c.db.pool.query(
        `SELECT resource_name, kind, data->>'state' AS state, coalesce((data->>'inline')::boolean, false) AS inline
           FROM event WHERE traversal_id = $1 AND data->>'update' = 'false' AND data->>'state' IN ('RUNNING', 'DONE') ORDER BY seq`,
        [traversalId],
      )).rows.map((e) => `${e.resource_name}:${e.kind}:${e.state}:${e.inline}`)

    // In place: every row ends at the new template, so each cleanup node is a no-op — done inline, never RUNNING in a worker.
    const up = await c.services.update(c.actor, res.stack.id, { template: chain(4, 'b', 0) })
    expect(await c.settle(res.stack.id)).toBe('UPDATE_COMPLETE')
    expect((await cleanupEvents(up.traversalId!)).sort()).toEqual(['r0', 'r1', 'r2', 'r3'].map((n) => `${n}:node:DONE:true`))
    // ... early: each in its own update's finish (one transaction: one timestamp), so r0's
    // first. Heat's order, dependents' cleanups first, would put r3's first and leave a
    // tail of cleanups after the last update node.
    const done = (
      await c.db.pool.query(
        `SELECT resource_name AS name, data->>'update' AS upd, created_at, coalesce((data->>'early')::boolean, false) AS early
           FROM event WHERE traversal_id = $1 AND data->>'state' = 'DONE' ORDER BY seq`,
        [up.traversalId],
      )
    ).rows as { name: string; upd: string; created_at: Date; early: boolean }[]
    const cleanups = done.filter((e) => e.upd === 'false')
    expect(cleanups.map((e) => `${e.name}:${e.early}`)).toEqual(['r0:true', 'r1:true', 'r2:true', 'r3:true'])
    for (const e of cleanups) expect(e.created_at, e.name).toEqual(done.find((u) => u.upd === 'true' && u.name === e.name)!.created_at)

    // Replace: the old rows must really be deleted, by a worker.
    const rep = await c.services.update(c.actor, res.stack.id, { template: chain(4, 'c', 0, { update_replace: true }) })
    expect(await c.settle(res.stack.id)).toBe('UPDATE_COMPLETE')
    const replaced = await cleanupEvents(rep.traversalId!)
    expect(replaced.filter((e) => e.endsWith(':true'))).toEqual([])
    expect(replaced.filter((e) => e.includes(':resource:RUNNING:'))).toHaveLength(4)
    const rows = await c.rows(res.stack.id)
    expect(visibleValues(rows)).toEqual({ r0: 'c-0', r1: 'c-1', r2: 'c-2', r3: 'c-3' })
    expect(rows.filter((r) => r.action !== 'DELETE')).toHaveLength(4)
    await expectNoLocks(res.stack.id)
  })

  test('with cleanups completed early, an old row is still deleted only after every row that used it has moved, and the stack completes only after that delete', async () => {
    // r0 <- r1 <- r2 <- r3; the update replaces r1 and leaves the others in place.
    const template = (value: string, replaceR1: boolean) => chain(4, value, 0.05, (i) => (replaceR1 && i === 1 ? { update_replace: true } : {}))
    const res = await c.services.create(c.actor, { name: 'early-mixed', template: template('a', false) })
    expect(await c.settle(res.stack.id)).toBe('CREATE_COMPLETE')
    const oldR1 = (await c.rows(res.stack.id)).find((r) => r.name === 'r1')!.id
    const up = await c.services.update(c.actor, res.stack.id, { template: template('b', true) })
    expect(await c.settle(res.stack.id)).toBe('UPDATE_COMPLETE')
    const { rows: ev } = await c.db.pool.query(
      `SELECT seq::int, kind, resource_id, resource_name AS name, action, status, data->>'update' AS upd, data->>'state' AS state, coalesce((data->>'early')::boolean, false) AS early
         FROM event WHERE traversal_id = $1 ORDER BY seq`,
      [up.traversalId],
    )
    const seqOf = (pred: (e: (typeof ev)[number]) => boolean, what: string) => {
      const e = ev.find(pred)
      expect(e, what).toBeDefined()
      return e!.seq as number
    }
    const oldR1Deleted = seqOf((e) => e.resource_id === oldR1 && e.action === 'DELETE' && e.status === 'COMPLETE', 'old r1 DELETE_COMPLETE')
    // r2 used the old r1 directly: it moved (its update finished) before the old r1 went.
    expect(seqOf((e) => e.name === 'r2' && e.action === 'UPDATE' && e.status === 'COMPLETE', 'r2 UPDATE_COMPLETE')).toBeLessThan(oldR1Deleted)
    // r0's cleanup, completed early, owed the old r1's report: the stack waited for it.
    expect(ev.filter((e) => e.upd === 'false' && e.state === 'DONE' && e.early).map((e) => e.name).sort()).toEqual(['r0', 'r2', 'r3'])
    const complete = seqOf((e) => e.kind === 'stack' && e.status === 'COMPLETE', 'stack COMPLETE')
    expect(Math.max(...ev.filter((e) => e.state === 'DONE').map((e) => e.seq))).toBeLessThan(complete)
    expect(complete).toBeGreaterThan(oldR1Deleted)
    const { rows: t } = await c.db.pool.query('SELECT roots_pending FROM traversal WHERE id = $1', [up.traversalId])
    expect(t[0].roots_pending).toBe(0)
    expect(visibleValues(await c.rows(res.stack.id))).toEqual({ r0: 'b-0', r1: 'b-1', r2: 'b-2', r3: 'b-3' })
    await expectNoLocks(res.stack.id)
  })

  test('cancel without rollback stops scheduling; in-flight resources finish; the stack is FAILED', async () => {
    // The chain starts behind a gate: the cancel comes while the gate's wait is in flight and r0.. wait for it.
    const template = JSON.parse(withGate(chain(5, 'a', 0), 1)) as { resources: Record<string, Record<string, unknown>> }
    template.resources.r0!.depends_on = ['gate']
    const res = await c.services.create(c.actor, { name: 'cancel-plain', template: JSON.stringify(template) })
    await gateHeld(c, res.stack.id)
    await c.services.cancel(c.actor, res.stack.id, { rollback: false })
    expect(await c.settle(res.stack.id)).toBe('CREATE_FAILED')
    expect((await c.stack(res.stack.id)).statusReason).toMatch(/cancelled/)
    // the in-flight wait goes on after the cancel, and finishes once signalled
    expect((await c.rows(res.stack.id)).filter((r) => r.engine_id !== null).map((r) => r.name)).toEqual(['gate'])
    await openGate(c, res.stack.id)
    await c.waitFor(async () => (await c.rows(res.stack.id)).every((r) => r.engine_id === null), 30_000, 'in-flight to finish')
    const rows = await c.rows(res.stack.id)
    // what was in flight finished; nothing after it was scheduled
    expect(rows.filter((r) => r.action === 'CREATE' && r.status === 'COMPLETE').map((r) => r.name).sort()).toEqual(['gate', 'gate_handle'])
  })

  test('cancel with rollback returns to the last good template', async () => {
    // A gate after the chain: the update's wait (a second signal) holds it in progress once every row is bad.
    const res = await c.services.create(c.actor, { name: 'cancel-rb', template: withGate(chain(4, 'good', 0.02), 1, { after: 'r3' }) })
    await gateHeld(c, res.stack.id)
    await openGate(c, res.stack.id)
    expect(await c.settle(res.stack.id)).toBe('CREATE_COMPLETE')
    await c.services.update(c.actor, res.stack.id, { template: withGate(chain(4, 'bad', 0.02), 2, { after: 'r3' }) })
    await gateHeld(c, res.stack.id)
    const chainValues = async () => visibleValues((await c.rows(res.stack.id)).filter((r) => r.name.startsWith('r')))
    expect(await chainValues()).toEqual({ r0: 'bad-0', r1: 'bad-1', r2: 'bad-2', r3: 'bad-3' })
    await c.services.cancel(c.actor, res.stack.id, { rollback: true })
    // The rollback puts the chain back and then waits for the gate's row, which the cancelled update's
    // wait still holds; the signal lets that wait finish.
    await c.waitFor(async () => (await c.stack(res.stack.id)).action === 'ROLLBACK', 30_000, 'the rollback to start')
    await openGate(c, res.stack.id)
    expect(await c.settle(res.stack.id)).toBe('ROLLBACK_COMPLETE')
    expect(await chainValues()).toEqual({ r0: 'good-0', r1: 'good-1', r2: 'good-2', r3: 'good-3' })
    await expectNoLocks(res.stack.id)
  })

  test('delete during an update aborts the in-flight action and removes everything', async () => {
    const res = await c.services.create(c.actor, { name: 'del-during', template: chain(2, 'a', 0.02) })
    expect(await c.settle(res.stack.id)).toBe('CREATE_COMPLETE')
    // An hour-long action: the delete can only complete within the test by aborting it.
    await c.services.update(c.actor, res.stack.id, { template: chain(2, 'b', 3600) })
    await c.waitFor(async () => (await c.rows(res.stack.id)).some((r) => r.engine_id !== null), 30_000, 'an action to start')
    await c.services.delete(c.actor, res.stack.id)
    expect(await c.settle(res.stack.id, 60_000)).toBe('DELETE_COMPLETE')
    expect(await c.rows(res.stack.id)).toEqual([])
  })

  test('delete after a cancel without rollback aborts the action the cancel left running', async () => {
    // The cancelled update leaves the stack with no current traversal, and its in-flight wait (never
    // signalled) still holds the gate's row: the delete can only complete by aborting that wait.
    const template = JSON.parse(withGate(chain(2, 'a', 0), 1)) as { resources: Record<string, Record<string, unknown>> }
    template.resources.r0!.depends_on = ['gate']
    const res = await c.services.create(c.actor, { name: 'del-after-cancel', template: JSON.stringify(template) })
    await gateHeld(c, res.stack.id)
    await c.services.cancel(c.actor, res.stack.id, { rollback: false })
    expect(await c.settle(res.stack.id)).toBe('CREATE_FAILED')
    expect((await c.stack(res.stack.id)).currentTraversalId).toBeNull()
    await c.services.delete(c.actor, res.stack.id)
    expect(await c.settle(res.stack.id, 30_000)).toBe('DELETE_COMPLETE')
    expect(await c.rows(res.stack.id)).toEqual([])
  })

  test('a failure fails the stack and, with rollback enabled, rolls back automatically', async () => {
    const bad = JSON.stringify({
      heat_template_version: '2018-08-31',
      resources: { ok: { type: 'OS::Heat::TestResource', properties: { value: 'x' } }, broken: { type: 'OS::Heat::TestResource', properties: { fail: true, wait_secs: 0.05 }, depends_on: ['ok'] } },
    })
    const res = await c.services.create(c.actor, { name: 'fails', template: bad, disableRollback: false })
    await c.waitFor(async () => (await c.stack(res.stack.id)).action === 'ROLLBACK' && (await c.stack(res.stack.id)).status !== 'IN_PROGRESS', 30_000, 'rollback to finish')
    expect(`${(await c.stack(res.stack.id)).action}_${(await c.stack(res.stack.id)).status}`).toBe('ROLLBACK_COMPLETE')
    const { rows: ev } = await c.db.pool.query(`SELECT action, status FROM event WHERE stack_id = $1 AND kind = 'stack' ORDER BY seq`, [res.stack.id])
    expect(ev.map((e) => `${e.action}_${e.status}`)).toEqual(['CREATE_IN_PROGRESS', 'CREATE_IN_PROGRESS', 'CREATE_FAILED', 'ROLLBACK_IN_PROGRESS', 'ROLLBACK_COMPLETE'])
    expect(await c.rows(res.stack.id)).toEqual([])
  })
})

describe('a worker killed while it holds locks', () => {
  test('SIGKILL mid-action: the lease runs out, the lock is broken, the traversal converges, no file is duplicated or leaked', async () => {
    const n = 4
    const res = await c.services.create(c.actor, { name: 'killme', template: files(n, 'one', 'killme') })
    // Wait until some worker holds a lock (a wait condition waiting for the test's signal), then kill
    // exactly that worker: it still holds the lock when it dies, however long that took.
    let holder: string | null = null
    await c.waitFor(
      async () => {
        const locked = (await c.rows(res.stack.id)).find((r) => r.engine_id && r.name.startsWith('w'))
        holder = locked?.engine_id ?? null
        return holder !== null
      },
      10_000,
      'a lock',
    )
    const victim = c.workers.find((w) => w.id === holder)
    expect(victim, 'the lock holder is one of our workers').toBeDefined()
    victim!.proc.kill('SIGKILL')
    c.spawnWorker() // keep three alive, as a supervisor would
    // Now the waits may end: the living workers' at once, the dead one's after its lock is broken and its node run again.
    await openGate(c, res.stack.id)
    expect(await c.settle(res.stack.id, 60_000)).toBe('CREATE_COMPLETE')
    const { rows: broken } = await c.db.pool.query(`SELECT count(*)::int AS n FROM event WHERE stack_id = $1 AND kind = 'lock' AND data->>'lock' = 'broken'`, [res.stack.id])
    expect(broken[0].n).toBeGreaterThan(0)
    await expectNoLocks(res.stack.id)
    expect(c.workspaceFiles()).toEqual([...Array(n).keys()].map((i) => `killme/f${i}.txt`).sort())

    await c.services.delete(c.actor, res.stack.id)
    expect(await c.settle(res.stack.id, 30_000)).toBe('DELETE_COMPLETE')
    expect(c.workspaceFiles().filter((f) => f.startsWith('killme/'))).toEqual([])
  })
})
