/**
 * The chaos driver (used by chaos.test.ts, short, and `npm run chaos`, long).
 *
 * On a PostgreSQL of its own (so restarting it disturbs no other test file),
 * several worker processes run many stacks of Kiln::File resources (real
 * files: physical resources that can be counted) and a
 * Kiln::Postgres::Database each (on that same server), mixed with delayed
 * OS::Heat::TestResource nodes, in chain and layered shapes. The outside
 * types observe their objects: a row whose worker was killed mid-action is
 * looked at and repaired in place, and at the end a drift check of every
 * stack must find every object as Kiln stored it. A driver submits
 * overlapping updates, updates that fail (and roll back), cancels with and
 * without rollback, and finally a good update or a delete for every stack;
 * meanwhile a killer SIGKILLs random workers and starts new ones, and
 * PostgreSQL itself is restarted once; once it is back, new stacks are
 * created and driven like the others. When everything has settled and no
 * worker is killed any more, PostgreSQL is restarted again while every worker
 * idles, and new stacks are created and one stack deleted: with no lease
 * running out and no fresh worker, only a worker that LISTENs again (or its
 * idle-claim timer) runs them. Afterwards every stack must be in the state its
 * last accepted operation asked for, and the invariants must hold, no drift
 * among them.
 */
import fs from 'node:fs'
import path from 'node:path'
import { TestCluster } from '../helpers/cluster'
import { isRetryable } from '../../lib/db/retry'
import { NotFoundError } from '../../lib/plan/errors'
import { ownPostgres } from '../helpers/own-postgres'
import { dumpForensics } from './chaos-forensics'

export interface ChaosOptions {
  stacks: number
  /** operations per stack before the final one */
  rounds: number
  workers: number
  /** mean milliseconds between kills */
  killEveryMs: number
  restartPostgres: boolean
  /** how long PostgreSQL stays down (default 800 ms) */
  pgDownMs?: number
  /** stacks created once PostgreSQL is back, mid-run and again after the quiet restart (default a quarter of `stacks`, at least 2) */
  stacksAfterRestart?: number
  log?: (line: string) => void
  /** where to write the trail of the stacks a violation names (see chaos-forensics.ts) */
  forensicsDir?: string
}

export interface ChaosReport {
  stacks: number
  /** of which created after a restart (mid-run, and after the quiet restart at the end) */
  stacksAfterRestart: number
  operations: number
  rejected: number
  kills: number
  postgresRestarts: number
  /** per kill that held locks: ms until none of its rows was locked any more */
  recoveryMs: number[]
  settleMs: number
  /** jobs of settled stacks still there when every stack had settled (dropped within 15 s, or a violation) */
  lateJobs: number
  violations: string[]
  /** the file the violations' trail was written to */
  forensics?: string
}

type Final = { kind: 'update'; seed: string; size: number } | { kind: 'delete' }

const rnd = (n: number) => Math.floor(Math.random() * n)

/** The database of a chaos stack (every run has a server of its own: the names cannot collide). */
const chaosDatabase = (stack: string) => `kiln_${stack.replace(/-/g, '_')}`
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Files f0..f{size-1} (chain or layered via depends_on), a database whose connection limit is the size, plus a delayed TestResource. */
export function chaosTemplate(stack: string, seed: string, size: number, shape: 'chain' | 'layered', opts: { delay: number; fail?: boolean }): string {
  const resources: Record<string, unknown> = {}
  for (let i = 0; i < size; i++) {
    const deps = shape === 'chain' ? (i > 0 ? [`f${i - 1}`] : []) : i >= 3 ? [`f${i - 3}`, `f${i - 3 + ((i + 1) % 3)}`].filter((d, k, a) => a.indexOf(d) === k) : []
    resources[`f${i}`] = { type: 'Kiln::File', properties: { path: `${stack}/f${i}.txt`, content: `${seed}:${i}` }, ...(deps.length ? { depends_on: deps } : {}) }
  }
  resources.slow = { type: 'OS::Heat::TestResource', properties: { value: seed, wait_secs: opts.delay, fail: opts.fail === true }, depends_on: ['f0'] }
  resources.db = { type: 'Kiln::Postgres::Database', properties: { name: chaosDatabase(stack), connection_limit: size }, depends_on: ['f0'] }
  return JSON.stringify({ heat_template_version: '2018-08-31', resources })
}

export async function runChaos(o: ChaosOptions): Promise<ChaosReport> {
  // Everything the driver did, timestamped, for the forensics file.
  const trail: string[] = []
  const log = (line: string) => {
    trail.push(`${new Date().toISOString().slice(11, 23)} ${line}`)
    o.log?.(line)
  }
  const pg = await ownPostgres('chaos')
  const url = pg.url
  // One project plays every tenant here: its quotas are lifted, and each role's limit kept small, so that the
  // server's connection budget holds the databases of every stack of a long run.
  const quotas = { KILN_PROJECT_MAX_DATABASES: '1000', KILN_PROJECT_CONNECTION_LIMIT: '100000', KILN_TENANT_CONNECTION_LIMIT: '4' }
  const c = await TestCluster.start(url, { workers: o.workers, leaseMs: 1500, concurrency: 8, env: { KILN_LOG_LEVEL: 'error', ...quotas } })
  const afterRestart = o.restartPostgres ? (o.stacksAfterRestart ?? Math.max(2, Math.ceil(o.stacks / 4))) : 0
  const report: ChaosReport = { stacks: o.stacks + 2 * afterRestart, stacksAfterRestart: 2 * afterRestart, operations: 0, rejected: 0, kills: 0, postgresRestarts: 0, recoveryMs: [], settleMs: 0, lateJobs: 0, violations: [] }
  let pgDown: Promise<void> | null = null
  let running = true

  try {
    // ---- the killer ----
    const killer = (async () => {
      const measures: Promise<void>[] = []
      while (running) {
        await sleep(o.killEveryMs / 2 + rnd(o.killEveryMs))
        if (!running) break
        const live = c.workers.filter((w) => w.proc.exitCode === null && w.proc.signalCode === null && w.id)
        if (live.length === 0) continue
        const victim = live[rnd(live.length)]!
        const held = pgDown ? 0 : Number((await c.db.pool.query('SELECT count(*)::int AS n FROM resource WHERE engine_id = $1', [victim.id]).catch(() => ({ rows: [{ n: 0 }] }))).rows[0].n)
        victim.proc.kill('SIGKILL')
        report.kills++
        const killedAt = Date.now()
        log(`killed worker ${victim.id?.slice(0, 8)} holding ${held} lock(s)`)
        if (held > 0) {
          measures.push(
            c.waitFor(
              async () => {
                try {
                  return Number((await c.db.pool.query('SELECT count(*)::int AS n FROM resource WHERE engine_id = $1', [victim.id])).rows[0].n) === 0
                } catch {
                  return false // PostgreSQL is restarting
                }
              },
              60_000, 'locks of a killed worker to be broken', 100)
              .then(() => void report.recoveryMs.push(Date.now() - killedAt))
              .catch((e: Error) => void report.violations.push(`locks of killed worker ${victim.id} never broken: ${e.message}`)),
          )
        }
        await sleep(300)
        c.spawnWorker()
      }
      await Promise.all(measures)
    })()

    // ---- the driver ----
    const finals = new Map<string, Final>()
    const shapes = new Map<string, 'chain' | 'layered'>()
    /**
     * Operations wait while PostgreSQL is down: a request cut off mid-commit would leave
     * "was it accepted?" unknowable. One can still be cut off by a restart that begins
     * while it runs; `final` operations are then submitted again until one is answered
     * (an update or a delete submitted twice converges to the same end), so that the
     * state every stack must end in is known.
     */
    const submit = async (what: string, fn: () => Promise<unknown>, final = false, doneBefore?: (err: unknown) => boolean): Promise<boolean> => {
      for (let attempt = 1; ; attempt++) {
        while (pgDown) await pgDown
        report.operations++
        log(`${what} submitted${attempt > 1 ? ` (attempt ${attempt})` : ''}`)
        try {
          await fn()
          log(`${what} accepted`)
          return true
        } catch (err) {
          if (attempt > 1 && doneBefore?.(err)) {
            log(`${what} accepted (the attempt that was cut off had been, and is done): ${(err as Error).message.slice(0, 120)}`)
            return true
          }
          report.rejected++
          log(`${what} rejected: ${(err as Error).message.slice(0, 120)}`)
          if (!final || !isRetryable(err) || attempt >= 10) return false
          await sleep(200)
        }
      }
    }
    /** `retryCreate`: a stack created after a restart must exist, so its create is retried like a final operation. */
    const drive = async (i: number, retryCreate = false) => {
      const name = `chaos-${i}`
      const shape = i % 2 ? 'chain' : 'layered'
      shapes.set(name, shape)
      let size = 4 + rnd(5)
      let id: string | null = null
      // (PostgreSQL is up by then, so a retry follows a call that failed before reaching it.)
      await submit(`${name} create s0 (${size})`, async () => {
        id = (await c.services.create(c.actor, { name, template: chaosTemplate(name, 's0', size, shape, { delay: 0.2 }) })).stack.id
      }, retryCreate)
      if (!id) return
      const stackId: string = id
      finals.set(stackId, { kind: 'update', seed: 's0', size })
      for (let r = 1; r <= o.rounds; r++) {
        await sleep(rnd(900))
        const roll = rnd(10)
        if (roll < 5) {
          const nsize = 3 + rnd(6)
          if (await submit(`${name} update s${r} (${nsize})`, () => c.services.update(c.actor, stackId, { template: chaosTemplate(name, `s${r}`, nsize, shape, { delay: 0.1 + rnd(3) / 10 }) }))) {
            size = nsize
            finals.set(stackId, { kind: 'update', seed: `s${r}`, size })
          }
        } else if (roll < 7) {
          // a failing update: rolls back to the last good template, which stays the expectation
          await submit(`${name} failing update bad${r}`, () => c.services.update(c.actor, stackId, { template: chaosTemplate(name, `bad${r}`, size, shape, { delay: 0.1, fail: true }) }))
        } else if (roll < 9) {
          await submit(`${name} cancel${roll === 7 ? ' with rollback' : ''}`, () => c.services.cancel(c.actor, stackId, { rollback: roll === 7 }))
        } else {
          // two updates back to back: the second supersedes the first mid-flight
          await submit(`${name} update x${r}`, () => c.services.update(c.actor, stackId, { template: chaosTemplate(name, `x${r}`, size, shape, { delay: 0.3 }) }))
          if (await submit(`${name} update y${r}`, () => c.services.update(c.actor, stackId, { template: chaosTemplate(name, `y${r}`, size, shape, { delay: 0.1 }) })))
            finals.set(stackId, { kind: 'update', seed: `y${r}`, size })
        }
      }
      // The final operation: a good update, or a delete.
      if (rnd(3) === 0) {
        // A delete cut off and submitted again finds the stack gone if the first one got through and finished.
        if (await submit(`${name} delete`, () => c.services.delete(c.actor, stackId), true, (err) => err instanceof NotFoundError)) finals.set(stackId, { kind: 'delete' })
      } else {
        const nsize = 3 + rnd(6)
        if (await submit(`${name} final update (${nsize})`, () => c.services.update(c.actor, stackId, { template: chaosTemplate(name, 'final', nsize, shape, { delay: 0.1 }) }), true))
          finals.set(stackId, { kind: 'update', seed: 'final', size: nsize })
      }
    }

    // ---- PostgreSQL restart, once, in the middle; then new stacks ----
    const restarter = o.restartPostgres
      ? (async () => {
          await sleep(2500 + rnd(1500))
          let release!: () => void
          pgDown = new Promise((r) => (release = r))
          log('restarting PostgreSQL')
          await pg.restart(o.pgDownMs ?? 800)
          report.postgresRestarts++
          log('PostgreSQL is back')
          pgDown = null
          release()
          await Promise.all(Array.from({ length: afterRestart }, (_, j) => drive(o.stacks + j, true)))
        })()
      : Promise.resolve()

    await Promise.all([...Array.from({ length: o.stacks }, (_, i) => drive(i)), restarter])
    await sleep(1500) // keep killing while the final operations run
    running = false
    await killer
    // every killed worker replaced; the system must now converge on its own
    const settleStart = Date.now()
    for (const id of finals.keys()) await c.settle(id, 120_000).catch((e: Error) => void report.violations.push(`stack ${id} did not settle: ${e.message.slice(0, 2000)}`))
    report.settleMs = Date.now() - settleStart

    // ---- a quiet restart: PostgreSQL down while every worker idles, then new work ----
    if (o.restartPostgres) {
      // A worker still starting would LISTEN from scratch after the restart and hide one that never LISTENs again.
      await c.waitFor(async () => c.workers.every((w) => w.id !== null || w.proc.exitCode !== null || w.proc.signalCode !== null), 60_000, 'every worker to be up')
      log('restarting PostgreSQL with every worker idle')
      await pg.restart(o.pgDownMs ?? 800)
      report.postgresRestarts++
      log('PostgreSQL is back; new stacks, and a delete')
      const quiet: Promise<unknown>[] = []
      for (let j = 0; j < afterRestart; j++) {
        const name = `chaos-${o.stacks + afterRestart + j}`
        const size = 3 + rnd(4)
        quiet.push(
          submit(`${name} create q (${size})`, async () => {
            const id = (await c.services.create(c.actor, { name, template: chaosTemplate(name, 'q', size, j % 2 ? 'chain' : 'layered', { delay: 0.1 }) })).stack.id
            finals.set(id, { kind: 'update', seed: 'q', size })
          }, true),
        )
      }
      const doomed = [...finals].find(([, f]) => f.kind === 'update')?.[0]
      if (doomed)
        quiet.push(
          submit(`delete ${doomed} after the quiet restart`, () => c.services.delete(c.actor, doomed), true, (err) => err instanceof NotFoundError).then((ok) => {
            if (ok) finals.set(doomed, { kind: 'delete' })
          }),
        )
      await Promise.all(quiet)
      for (const id of finals.keys()) await c.settle(id, 60_000).catch((e: Error) => void report.violations.push(`stack ${id} did not settle after the quiet restart: ${e.message.slice(0, 2000)}`))
    }

    // ---- invariants ----
    const v = report.violations
    const expectedFiles: string[] = []
    for (const [id, fin] of finals) {
      const s = await c.stack(id)
      const state = `${s.action}_${s.status}`
      const name = (await c.db.pool.query('SELECT name FROM stack WHERE id = $1', [id])).rows[0].name as string
      if (fin.kind === 'delete') {
        if (state !== 'DELETE_COMPLETE') v.push(`${name}: last operation was delete, state ${state}`)
        continue
      }
      if (!['CREATE_COMPLETE', 'UPDATE_COMPLETE'].includes(state)) v.push(`${name}: last accepted operation was an update to ${fin.seed}, state ${state} (${s.statusReason})`)
      const rows = (await c.rows(id)).filter((r) => !(r.action === 'DELETE' && r.status === 'COMPLETE'))
      const names = rows.map((r) => r.name).sort()
      const want = [...Array.from({ length: fin.size }, (_, k) => `f${k}`), 'slow', 'db'].sort()
      if (JSON.stringify(names) !== JSON.stringify(want)) v.push(`${name}: rows ${names.join(',')} != template ${want.join(',')}`)
      for (let k = 0; k < fin.size; k++) {
        const file = path.join(c.projectWorkspace(), name, `f${k}.txt`)
        expectedFiles.push(path.join(name, `f${k}.txt`))
        const content = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : null
        if (content !== `${fin.seed}:${k}`) v.push(`${name}/f${k}.txt holds ${JSON.stringify(content)}, template says ${fin.seed}:${k}`)
      }
    }
    // one database per stack that is not deleted, with the connection limit its template says; none leaked
    const expectedDatabases = new Map<string, number>()
    for (const [id, fin] of finals) {
      if (fin.kind !== 'update') continue
      const name = (await c.db.pool.query('SELECT name FROM stack WHERE id = $1', [id])).rows[0].name as string
      expectedDatabases.set(chaosDatabase(name), fin.size)
    }
    const databases = (await c.db.pool.query(`SELECT datname, datconnlimit FROM pg_database WHERE datname LIKE 'kiln\\_chaos\\_%'`)).rows as { datname: string; datconnlimit: number }[]
    for (const d of databases) {
      const want = expectedDatabases.get(d.datname)
      if (want === undefined) v.push(`database ${d.datname} no stack owns (leaked)`)
      else if (d.datconnlimit !== want) v.push(`database ${d.datname} has connection limit ${d.datconnlimit}, template says ${want}`)
    }
    for (const name of expectedDatabases.keys()) if (!databases.some((d) => d.datname === name)) v.push(`database ${name} is missing`)

    // no drift: every object of every stack is as Kiln stored it (a drift check observes them all)
    for (const [id, fin] of finals) {
      if (fin.kind !== 'update') continue
      try {
        await c.services.drift(c.actor, id)
        const state = await c.settle(id, 60_000)
        if (state !== 'DRIFT_COMPLETE') v.push(`stack ${id}: the drift check ended ${state}`)
        const found = (await c.db.pool.query(
          `SELECT d.resource_name, d.state, d.changes, d.problems FROM drift_result d JOIN traversal t ON t.id = d.traversal_id
            WHERE t.stack_id = $1 AND t.id = (SELECT current_traversal_id FROM stack WHERE id = $1)`,
          [id],
        )).rows
        if (found.length !== fin.size + 2) v.push(`stack ${id}: the drift check looked at ${found.length} resources, not ${fin.size + 2}`)
        for (const r of found) if (r.state !== 'IN_SYNC') v.push(`stack ${id}: ${r.resource_name} drifted (${r.state} ${JSON.stringify(r.changes)} ${JSON.stringify(r.problems)})`)
      } catch (err) {
        v.push(`stack ${id}: the drift check could not run: ${(err as Error).message}`)
      }
    }

    // one physical file per logical resource: nothing duplicated, nothing leaked
    const files = c.workspaceFiles()
    const extra = files.filter((f) => !expectedFiles.includes(f))
    if (extra.length) v.push(`files no stack owns (leaked or duplicated): ${extra.join(', ')}`)
    const q = async (sql: string) => (await c.db.pool.query(sql)).rows
    for (const r of await q(`SELECT r.id, r.name, r.engine_id FROM resource r WHERE r.engine_id IS NOT NULL`)) v.push(`row ${r.name}#${r.id} still locked by ${r.engine_id}`)
    for (const r of await q(`SELECT s.name FROM stack s WHERE s.status = 'IN_PROGRESS'`)) v.push(`stack ${r.name} still IN_PROGRESS`)
    for (const r of await q(`SELECT t.id, s.name FROM traversal t JOIN stack s ON s.current_traversal_id = t.id WHERE t.ended_at IS NULL`)) v.push(`current traversal ${r.id} of ${r.name} never ended`)
    for (const r of await q(`SELECT stack_id, count(*)::int AS n, min(seq)::int AS lo, max(seq)::int AS hi FROM event GROUP BY stack_id`))
      if (r.n !== r.hi - r.lo + 1 || r.lo !== 1) v.push(`stack ${r.stack_id}: events ${r.lo}..${r.hi} but ${r.n} rows (gap)`)
    // A job of a superseded traversal claimed by a worker killed at the very end may outlive its
    // stack's settling by a lease: the sweeper gives it back, and the next worker to claim it finds
    // it stale and drops it. Every such job must be gone soon after; none may stay.
    const leftJobs = `SELECT j.id, j.kind, j.locked_by, s.name FROM job j JOIN stack s ON s.id = j.stack_id WHERE s.status <> 'IN_PROGRESS'`
    report.lateJobs = (await q(leftJobs)).length
    await c.waitFor(async () => (await q(leftJobs)).length === 0, 15_000, 'jobs of settled stacks to be dropped', 250).catch(() => {})
    for (const r of await q(leftJobs)) v.push(`job ${r.id} (${r.kind}, claimed by ${r.locked_by ?? 'nobody'}) left for settled stack ${r.name}`)
    // Workers die only when the killer says so (one started while PostgreSQL restarts waits for it).
    for (const w of c.workers)
      if (w.proc.exitCode !== null && w.proc.signalCode === null) v.push(`a worker exited on its own (code ${w.proc.exitCode}): ${w.output.join('').slice(0, 1500)}`)
    if (v.length && o.forensicsDir) report.forensics = await dumpForensics(c.db.pool, v, o.forensicsDir, trail)
    return report
  } finally {
    running = false
    await c.stop().catch(() => {})
    await pg.stop()
  }
}
