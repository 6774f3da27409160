/**
 * `npm run bench [-- --json] [--shapes chain,layered] [--sizes 100,1000] [--delays 0,0.2] [--workers 2] [--concurrency 64] [--phases create,update,replace,delete] [--profile] [--durable] [--watched] [--cold-plans] [--repeat 1] [--pg name=value ...]`
 *
 * --repeat k runs each shape k times and reports the median wall time (with the
 * range): this machine's speed varies by tens of percent from minute to minute.
 *
 * Runs create -> update all in place -> replace all -> delete of generated
 * OS::Heat::TestResource stacks through the service layer, with real worker
 * processes, on a dedicated embedded PostgreSQL (.data/bench-pg) or on the
 * database of DATABASE_URL (emptied first!). Prints wall seconds, ms per
 * resource, nodes per second, wall / critical path, database
 * transactions per graph node, and the CPU each phase cost per graph node in
 * the workers, PostgreSQL and this process (bench/cpu.ts); with D > 0 also
 * where the time above the critical path went (bench/breakdown.ts).
 *
 * --watched follows every stack's events the way a web server with the stack
 * open in a browser does (an event_watch row), so each step also sends its
 * NOTIFY; without it nobody watches, as for CLI and CI runs.
 *
 * --cold-plans measures each phase right after the VACUUM ANALYZE that precedes
 * it, when every worker connection must plan its statements again; by default
 * a small stack is created and deleted in between (not measured), as long-running
 * workers keep their plans from one operation to the next.
 *
 * --profile (embedded PostgreSQL only) runs a separate cluster with
 * pg_stat_statements (nested statements included) and prints, after each
 * phase, the statements and functions that took the database's time.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import pg from 'pg'
import { childEnv, env } from '../lib/env'
import { benchDatabase } from './database'
import { createDb } from '../lib/db/client'
import { ALL_STACKS, HARNESS_WATCH_MS, watchStackEvents } from '../lib/db/queries/watch'
import { builtinTypes, createRegistry, typeCatalog } from '../lib/resources/registry'
import { createStackService } from '../lib/services/stacks'
import { EMPTY_TEMPLATE_SOURCE } from '../lib/plan/template-check'
import { checkSubmission } from '../lib/services/templates'
import { configureEvaluation } from '../lib/evaluation/pool'
import { evaluationSettingsFrom } from '../lib/evaluation/settings'
import { MARK_AFTER_MS } from '../lib/engine/check-resource'
import { cpuSnapshot, cpuUse, type CpuUse } from './cpu'
import { criticalPathBreakdown, formatBreakdown, round, type Breakdown } from './breakdown'
import { benchTemplate, criticalPathNodes, type Shape } from './shapes'

interface Args {
  json: boolean
  shapes: Shape[]
  sizes: number[]
  delays: number[]
  workers: number
  /** job slots per worker (KILN_WORKER_CONCURRENCY) */
  concurrency: number
  lastPhase: PhaseName
  profile: boolean
  /** every step waits for the disk, lazy commits off (KILN_LAZY_COMMITS=false) */
  durable: boolean
  watched: boolean
  /** measure right after the VACUUM ANALYZE, with the workers' cached plans invalidated */
  coldPlans: boolean
  /** runs per shape; the summary gives the median */
  repeat: number
  /** extra settings for the embedded cluster (--pg name=value, repeatable), for experiments */
  pgSettings: Record<string, string>
}

function parseArgs(argv: string[]): Args {
  const get = (flag: string) => {
    const i = argv.indexOf(flag)
    return i >= 0 ? argv[i + 1] : undefined
  }
  return {
    json: argv.includes('--json'),
    shapes: (get('--shapes') ?? 'chain,wide,layered').split(',') as Shape[],
    sizes: (get('--sizes') ?? '100,1000,10000').split(',').map(Number),
    delays: (get('--delays') ?? '0,0.2').split(',').map(Number),
    workers: Number(get('--workers') ?? 2),
    concurrency: Number(get('--concurrency') ?? 64),
    profile: argv.includes('--profile'),
    durable: argv.includes('--durable'),
    watched: argv.includes('--watched'),
    coldPlans: argv.includes('--cold-plans'),
    repeat: Math.max(1, Number(get('--repeat') ?? 1)),
    pgSettings: Object.fromEntries(
      argv.flatMap((a, i) => {
        const kv = a === '--pg' ? argv[i + 1]?.match(/^([\w.]+)=(.*)$/s) : null
        return kv ? [[kv[1]!, kv[2]!]] : []
      }),
    ),
    // Later phases need the earlier ones (update needs a created stack): --phases create
    // stops after create; --phases create,update after update.
    lastPhase: (get('--phases') ?? 'create,update,replace,delete').split(',').at(-1) as PhaseName,
  }
}

type PhaseName = 'create' | 'update' | 'replace' | 'delete'

interface Row {
  shape: Shape
  n: number
  delay: number
  phase: PhaseName
  wallS: number
  msPerResource: number
  nodesPerS: number
  nodes: number
  criticalPathS: number | null
  wallOverCritical: number | null
  txnsPerNode: number
  /** with D > 0: where the time above the critical path went (bench/breakdown.ts) */
  breakdown?: Breakdown | null
  /** CPU per node of the workers, PostgreSQL and this process, and the machine's idle share (bench/cpu.ts) */
  cpu?: CpuUse | null
  /** with --repeat: every run's wall seconds (wallS and the rates are the median run's) */
  runsS?: number[]
}

async function main() {
  const args = parseArgs(process.argv.slice(2))
  const e = env()
  const { url, stop: stopPg } = await benchDatabase(
    e,
    args.profile
      ? { dir: 'bench-profile-pg', database: 'kiln_bench', settings: { ...PROFILE_SETTINGS, ...args.pgSettings } }
      : { dir: 'bench-pg', database: 'kiln_bench', settings: args.pgSettings },
  )
  const db = createDb(url, { max: 4 })
  if (args.profile) await db.pool.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements')
  await db.pool.query(`TRUNCATE stack, project, worker, job, event_watch CASCADE`)
  const { rows } = await db.pool.query(`INSERT INTO project (name) VALUES ('bench') RETURNING id`)
  const actor = { projectId: rows[0].id as string, name: 'bench' }
  const registry = createRegistry(builtinTypes())
  const services = createStackService({ db, catalog: typeCatalog(registry), types: registry, limits: { maxTemplateBytes: 64 << 20, maxResourcesPerStack: 100_000 }, defaultTimeoutMins: 120 })
  // Submissions are checked on evaluation threads: start them (about a second) before anything is timed, as the web server does at boot.
  configureEvaluation(evaluationSettingsFrom(e))
  await checkSubmission({ template: EMPTY_TEMPLATE_SOURCE }, { catalog: typeCatalog(registry), limits: { maxTemplateBytes: 1 << 20, maxResourcesPerStack: 1 }, stackName: 'warm-up' })

  const workers: ChildProcess[] = []
  for (let i = 0; i < args.workers; i++) {
    workers.push(
      spawn(process.execPath, ['--import', 'tsx', 'worker/main.ts'], {
        env: childEnv({ DATABASE_URL: url, KILN_LOG_LEVEL: 'warn', KILN_WORKER_CONCURRENCY: String(args.concurrency), KILN_LAZY_COMMITS: String(!args.durable) }),
        stdio: ['ignore', 'inherit', 'inherit'],
      }),
    )
  }
  // For the CPU split (bench/cpu.ts): each worker is the node process spawned above.
  const workerPids = workers.flatMap((w) => (w.pid ? [w.pid] : []))
  const listener = new pg.Client({ connectionString: url })
  await listener.connect()
  // kiln_stack: one notification when a stack's operation ends (not one per event).
  await listener.query('LISTEN kiln_stack')
  if (args.watched) {
    // A follower of every stack's events, as a web server with the stacks open: each step NOTIFYs.
    await listener.query('LISTEN kiln_events')
    await watchStackEvents(db.pool, crypto.randomUUID(), [ALL_STACKS], HARNESS_WATCH_MS)
  }
  // Everyone waiting for a stack to settle wakes on any kiln_stack notification
  // (the replan below waits for several stacks at once). Its payload names the
  // traversal and how it ended, so a waiter that knows its traversal is done
  // when the notification arrives, as a client listening on kiln_stack is;
  // the others re-read the stack row.
  const waiters = new Set<() => void>()
  const settled = new Map<string, string>()
  listener.on('notification', (m) => {
    if (m.channel !== 'kiln_stack') return
    try {
      const p = JSON.parse(m.payload ?? '') as { traversal_id?: string; action?: string; status?: string }
      if (p.traversal_id && p.action && p.status) settled.set(p.traversal_id, `${p.action}_${p.status}`)
    } catch {
      /* not ours: the waiters re-read */
    }
    for (const w of waiters) w()
    waiters.clear()
  })

  const waitDone = async (stackId: string, traversalId: string | null = null): Promise<string> => {
    for (;;) {
      const said = traversalId === null ? undefined : settled.get(traversalId)
      if (said) return said
      const notified = new Promise<void>((r) => waiters.add(r))
      const { rows: s } = await db.pool.query('SELECT action, status, status_reason FROM stack WHERE id = $1', [stackId])
      if (s[0].status !== 'IN_PROGRESS') return `${s[0].action}_${s[0].status}`
      // Timer reason: a safety net only; the notification normally wakes us.
      await Promise.race([notified, new Promise((r) => setTimeout(r, 1000))])
    }
  }
  // Write transactions, counted exactly: the next transaction id to be handed out (a
  // transaction that writes gets one; pg_stat_database's commit counter is flushed lazily).
  const txns = async () => Number((await db.pool.query(`SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS x`)).rows[0].x)
  const nodesOf = async (traversalId: string | null) => (traversalId ? Number((await db.pool.query('SELECT node_count FROM traversal WHERE id = $1', [traversalId])).rows[0].node_count) : 0)

  // Wait for the workers to register.
  for (;;) {
    const { rows: w } = await db.pool.query(`SELECT count(*)::int AS n FROM worker WHERE stopped_at IS NULL`)
    if (w[0].n >= args.workers) break
    await new Promise((r) => setTimeout(r, 100))
  }

  // Warm-up, not measured: long-running workers have their code compiled by the
  // JIT; fresh ones take ~100 ms longer on their first traversal, which would
  // land on whichever phase happens to run first.
  await waitDone((await services.create(actor, { name: 'warm-up', template: benchTemplate('layered', 40, 0, { value: 'w', replace: false }) })).stack.id)
  await waitDone((await services.update(actor, 'warm-up', { template: benchTemplate('layered', 40, 0, { value: 'x', replace: true }) })).stack.id)
  await waitDone((await services.delete(actor, 'warm-up')).stack.id)
  // After a VACUUM ANALYZE: small stacks taken through every phase, so that the
  // workers' connections re-plan the node steps' statements (the new
  // statistics invalidated every cached plan) before the measured phase, not
  // during it. Long-running workers keep their plans across operations; only
  // the first steps after an autovacuum's ANALYZE pay for new ones.
  // Every connection, not one or two: a worker's pool hands out the connection
  // released last, so one small stack at D = 0 ran on one or two of a worker's
  // eight, and a burst of the measured phase (ten actions ending together, a
  // replace call each) re-planned on the rest. REPLAN_STACKS stacks side by
  // side, with actions long enough to overlap and, in the in-place update, to
  // be marked UPDATE_IN_PROGRESS (longer than MARK_AFTER_MS), reach them all.
  // Two layers of ten, each node needing two of the first: the in-place
  // update's last finishes then complete no-op cleanup nodes that have
  // successors of their own (a cascade, as at the end of every measured
  // update), whose statements a wide stack never reached, so each measured
  // update planned them at its end.
  let replans = 0
  const REPLAN_STACKS = 4
  const REPLAN_DELAY_S = (MARK_AFTER_MS + 10) / 1000
  const replan = async () => {
    const names = Array.from({ length: REPLAN_STACKS }, (_, i) => `replan-${replans}-${i}`)
    replans++
    const tpl = (value: string, replace: boolean) => benchTemplate('layered', 20, REPLAN_DELAY_S, { value, replace }, 2)
    const each = (op: (name: string) => Promise<{ stack: { id: string } }>) => Promise.all(names.map(async (name) => waitDone((await op(name)).stack.id)))
    await each((name) => services.create(actor, { name, template: tpl('r', false) }))
    await each((name) => services.update(actor, name, { template: tpl('s', false) }))
    await each((name) => services.update(actor, name, { template: tpl('t', true) }))
    await each((name) => services.delete(actor, name))
  }

  const results: Row[] = []
  let k = 0
  for (const shape of args.shapes)
    for (const n of args.sizes)
      for (const delay of args.delays) {
        if (delay > 0 && n > 1000) continue // 10,000 x 0.2 s is a different benchmark (hours of sleeping per chain)
        const runs: Row[] = []
        for (let rep = 0; rep < args.repeat; rep++) {
          const name = `b${k++}-${shape}-${n}`
          const phases: [PhaseName, () => Promise<{ traversalId: string | null; stack: { id: string } }>][] = [
            ['create', () => services.create(actor, { name, template: benchTemplate(shape, n, delay, { value: 'a', replace: false }) })],
            ['update', () => services.update(actor, name, { template: benchTemplate(shape, n, delay, { value: 'b', replace: false }) })],
            ['replace', () => services.update(actor, name, { template: benchTemplate(shape, n, delay, { value: 'c', replace: true }) })],
            ['delete', () => services.delete(actor, name)],
          ]
          for (const [phase, run] of phases) {
            // Not measured: vacuum what the last phase churned, so that autovacuum is less
            // likely to take one of the machine's two cores in the middle of a measured phase.
            await db.pool.query('VACUUM ANALYZE')
            if (!args.coldPlans) await replan()
            if (args.profile) await db.pool.query('SELECT pg_stat_statements_reset(), pg_stat_reset()')
            const t0 = await txns()
            const cpu0 = cpuSnapshot(workerPids)
            const started = performance.now()
            const submittedAt = Date.now()
            const res = await run()
            const serviceMs = performance.now() - started
            const outcome = await waitDone(res.stack.id, res.traversalId)
            const wallS = (performance.now() - started) / 1000
            const noticedAt = Date.now()
            const cpu1 = cpuSnapshot(workerPids)
            const nodes = await nodesOf(res.traversalId)
            const t1 = await txns()
            const cpNodes = criticalPathNodes(shape, n) * (phase === 'replace' ? 2 : 1)
            const criticalPathS = delay > 0 ? cpNodes * delay : null
            const row: Row = {
              shape,
              n,
              delay,
              phase,
              wallS: round(wallS, 3),
              msPerResource: round((wallS * 1000) / n, 3),
              nodesPerS: round(nodes / wallS, 0),
              nodes,
              criticalPathS,
              wallOverCritical: criticalPathS ? round(wallS / criticalPathS, 3) : null,
              txnsPerNode: round((t1 - t0) / Math.max(1, nodes), 2),
              cpu: cpuUse(cpu0, cpu1, nodes),
            }
            if (delay > 0 && res.traversalId) row.breakdown = await criticalPathBreakdown(db.pool, res.traversalId, delay, submittedAt, serviceMs, noticedAt)
            runs.push(row)
            if (!args.json) console.log(`${shape.padEnd(8)} n=${String(n).padEnd(6)} D=${delay}s ${phase.padEnd(8)} ${outcome.padEnd(18)} wall ${row.wallS.toFixed(2)} s  ${row.msPerResource.toFixed(2)} ms/res  ${row.nodesPerS} nodes/s  ${row.wallOverCritical ? `wall/cp ${row.wallOverCritical}` : ''}  ${row.txnsPerNode} write txn/node`)
            if (!args.json && row.breakdown) console.log(formatBreakdown(row.breakdown))
            if (!args.json && row.cpu) console.log(`    CPU per node: workers ${row.cpu.workersMsPerNode} ms, PostgreSQL ${row.cpu.postgresMsPerNode} ms, bench ${row.cpu.benchMsPerNode} ms; cores idle ${Math.round(row.cpu.idleShare * 100)} %`)
            if (args.profile) console.log(await profileReport(db.pool, nodes))
            if (!outcome.endsWith('COMPLETE')) throw new Error(`${name} ${phase} ended ${outcome}`)
            if (phase === args.lastPhase) {
              // Not measured: the next run starts from an equally empty database.
              if (phase !== 'delete') await waitDone((await services.delete(actor, name)).stack.id)
              break
            }
          }
        }
        results.push(...summarise(runs, args.repeat, args.json))
      }
  if (args.json) console.log(JSON.stringify({ machine: { cpus: (await import('node:os')).cpus().length, node: process.version }, workers: args.workers, results }, null, 2))

  for (const w of workers) w.kill('SIGTERM')
  await Promise.all(workers.map((w) => new Promise((r) => w.once('exit', r))))
  await listener.end()
  await db.close()
  await stopPg()
}

/** One row per phase: the median run's (by wall time), with every run's wall time when repeated. */
function summarise(runs: Row[], repeat: number, quiet: boolean): Row[] {
  if (repeat === 1) return runs
  const byPhase = new Map<PhaseName, Row[]>()
  for (const r of runs) byPhase.set(r.phase, [...(byPhase.get(r.phase) ?? []), r])
  const out: Row[] = []
  for (const [phase, rows] of byPhase) {
    const sorted = [...rows].sort((a, b) => a.wallS - b.wallS)
    const median = sorted[Math.floor((sorted.length - 1) / 2)]!
    const runsS = sorted.map((r) => r.wallS)
    out.push({ ...median, runsS })
    if (!quiet) {
      const cp = median.wallOverCritical ? `  wall/cp ${median.wallOverCritical} (${sorted.map((r) => r.wallOverCritical).join(', ')})` : ''
      console.log(`  median of ${rows.length}: ${median.shape} n=${median.n} D=${median.delay}s ${phase} wall ${median.wallS.toFixed(2)} s (runs ${runsS.map((v) => v.toFixed(2)).join(', ')})${cp}`)
    }
  }
  return out
}

const PROFILE_SETTINGS = {
  shared_preload_libraries: 'pg_stat_statements',
  'pg_stat_statements.track': 'all',
  track_functions: 'pl',
}

/** Where the database spent a phase's time: top statements (nested included) and PL/pgSQL functions. */
async function profileReport(pool: pg.Pool, nodes: number): Promise<string> {
  const per = (v: number) => (v / Math.max(1, nodes)).toFixed(3)
  const { rows: st } = await pool.query(
    `SELECT calls::int, total_exec_time AS ms, toplevel, regexp_replace(left(query, 90), '\\s+', ' ', 'g') AS q
       FROM pg_stat_statements WHERE query NOT ILIKE '%pg_stat%' ORDER BY total_exec_time DESC LIMIT 40`,
  )
  const { rows: fn } = await pool.query(
    `SELECT funcname, calls::int, total_time AS total, self_time AS self FROM pg_stat_user_functions ORDER BY self_time DESC LIMIT 8`,
  )
  const lines = ['  statements (ms per graph node, calls; * = top level):']
  for (const r of st) lines.push(`    ${per(r.ms).padStart(7)} ms ${String(r.calls).padStart(7)}x ${r.toplevel ? '*' : ' '} ${r.q}`)
  lines.push('  functions (self / total ms per graph node, calls):')
  for (const r of fn) lines.push(`    ${per(r.self).padStart(7)} / ${per(r.total).padStart(7)} ms ${String(r.calls).padStart(7)}x ${r.funcname}`)
  return lines.join('\n')
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
