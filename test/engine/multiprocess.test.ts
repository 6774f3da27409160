/**
 * The convergence behaviours on the real path: several worker processes
 * against PostgreSQL, resource actions with real delays, updates submitted
 * mid-traversal (repeated), cancel with and without rollback, delete during an
 * update, and a worker killed with SIGKILL while it holds locks.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { testDatabase, type TestDatabase } from '../helpers/db'
import { TestCluster } from '../helpers/cluster'

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

function files(n: number, content: string, wait: number, prefix: string): string {
  const resources: Record<string, unknown> = {}
  for (let i = 0; i < n; i++) {
    resources[`f${i}`] = { type: 'Kiln::File', properties: { path: `${prefix}/f${i}.txt`, content: `${content}-${i}` } }
    resources[`w${i}`] = { type: 'OS::Heat::TestResource', properties: { value: 'x', wait_secs: wait }, depends_on: [`f${i}`] }
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
    // Actions of 0.25 s against updates 85–210 ms apart: every update lands while some
    // row is locked, even when a loaded machine delays the workers (0.1 s did not, once).
    const res = await c.services.create(c.actor, { name: 'overlap', template: chain(6, 'v0', 0.25) })
    let last = 'v0'
    for (let k = 1; k <= 6; k++) {
      await new Promise((r) => setTimeout(r, 60 + k * 25))
      last = `v${k}`
      await c.services.update(c.actor, res.stack.id, { template: chain(6, last, 0.25) })
    }
    expect(await c.settle(res.stack.id)).toBe('UPDATE_COMPLETE')
    const rows = await c.rows(res.stack.id)
    expect(visibleValues(rows)).toEqual(Object.fromEntries([...Array(6).keys()].map((i) => [`r${i}`, `${last}-${i}`])))
    // value is update_allowed: nothing was replaced, one row per resource.
    expect(rows.filter((r) => r.action !== 'DELETE')).toHaveLength(6)
    expect(rows.every((r) => r.name.startsWith('r'))).toBe(true)
    await expectNoLocks(res.stack.id)
    // Some node of a newer traversal must have found its row locked by an older one and been retriggered.
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
    const res = await c.services.create(c.actor, { name: 'cancel-plain', template: chain(5, 'a', 0.3) })
    await new Promise((r) => setTimeout(r, 450))
    await c.services.cancel(c.actor, res.stack.id, { rollback: false })
    expect(await c.settle(res.stack.id)).toBe('CREATE_FAILED')
    expect((await c.stack(res.stack.id)).statusReason).toMatch(/cancelled/)
    await c.waitFor(async () => (await c.rows(res.stack.id)).every((r) => r.engine_id === null), 10_000, 'in-flight to finish')
    const created = (await c.rows(res.stack.id)).filter((r) => r.action === 'CREATE' && r.status === 'COMPLETE')
    expect(created.length).toBeGreaterThan(0)
    expect(created.length).toBeLessThan(5)
  })

  test('cancel with rollback returns to the last good template', async () => {
    const res = await c.services.create(c.actor, { name: 'cancel-rb', template: chain(4, 'good', 0.02) })
    expect(await c.settle(res.stack.id)).toBe('CREATE_COMPLETE')
    await c.services.update(c.actor, res.stack.id, { template: chain(4, 'bad', 0.3) })
    await new Promise((r) => setTimeout(r, 400))
    await c.services.cancel(c.actor, res.stack.id, { rollback: true })
    expect(await c.settle(res.stack.id)).toBe('ROLLBACK_COMPLETE')
    expect(visibleValues(await c.rows(res.stack.id))).toEqual({ r0: 'good-0', r1: 'good-1', r2: 'good-2', r3: 'good-3' })
    await expectNoLocks(res.stack.id)
  })

  test('delete during an update aborts the in-flight action and removes everything', async () => {
    const res = await c.services.create(c.actor, { name: 'del-during', template: chain(2, 'a', 0.02) })
    expect(await c.settle(res.stack.id)).toBe('CREATE_COMPLETE')
    await c.services.update(c.actor, res.stack.id, { template: chain(2, 'b', 30) }) // would take a minute
    await c.waitFor(async () => (await c.rows(res.stack.id)).some((r) => r.engine_id !== null), 10_000, 'an action to start')
    const started = Date.now()
    await c.services.delete(c.actor, res.stack.id)
    expect(await c.settle(res.stack.id, 20_000)).toBe('DELETE_COMPLETE')
    expect(Date.now() - started, 'the 30 s action was aborted').toBeLessThan(10_000)
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
    const res = await c.services.create(c.actor, { name: 'killme', template: files(n, 'one', 1.5, 'killme') })
    // Wait until some worker holds a lock, then kill exactly that worker.
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
