/**
 * `npm run bench:fairness [-- --runs 7] [--flood 5000] [--waits 140] [--workers 2] [--concurrency 64] [--give-up 120] [--json]`
 *
 * How long project A's one-resource create takes while project B floods the
 * installation, against the same create on an idle one. Real worker
 * processes, a dedicated embedded PostgreSQL (.data/bench-fair-pg) or the
 * database of DATABASE_URL (emptied first!). Each figure is the median of
 * `--runs` creates, from the submit to the stack's CREATE_COMPLETE (NOTIFY
 * kiln_stack).
 *
 *   idle      nothing else runs;
 *   waits     B's `--waits` wait conditions wait for signals that never come;
 *   slow      B's `--flood` ready nodes, each an action of 1 s (B keeps its
 *             share of the slots busy for the whole measurement);
 *   busy      B's `--flood` nodes that take no time and pass values along
 *             (half of them read an attribute of one of the other half): the
 *             workers and PostgreSQL are as busy as B can make them.
 * A flood is started, and A's creates are measured only while it still has
 * at least a fifth of its nodes ready in the queue (a new flood is started
 * when it runs low). Target: every flooded median within 2x of idle.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import crypto from 'node:crypto'
import pg from 'pg'
import { childEnv, env } from '../lib/env'
import { benchDatabase } from './database'
import { createDb } from '../lib/db/client'
import { builtinTypes, createRegistry, typeCatalog } from '../lib/resources/registry'
import { createStackService, type Actor } from '../lib/services/stacks'
import { EMPTY_TEMPLATE_SOURCE } from '../lib/plan/template-check'
import { checkSubmission } from '../lib/services/templates'
import { configureEvaluation } from '../lib/evaluation/pool'
import { evaluationSettingsFrom } from '../lib/evaluation/settings'

interface Args {
  runs: number
  flood: number
  waits: number
  workers: number
  concurrency: number
  json: boolean
  /** a create not done after this many seconds counts as this many (a version whose waits hold every slot never finishes it) */
  giveUpS: number
}

function parseArgs(argv: string[]): Args {
  const get = (flag: string, def: number) => {
    const i = argv.indexOf(flag)
    return i >= 0 ? Number(argv[i + 1]) : def
  }
  return { runs: get('--runs', 7), flood: get('--flood', 5000), waits: get('--waits', 140), workers: get('--workers', 2), concurrency: get('--concurrency', 64), json: argv.includes('--json'), giveUpS: get('--give-up', 120) }
}

const HOT = 'heat_template_version: 2018-08-31'
const ONE = `${HOT}\nresources:\n  r: {type: OS::Heat::TestResource, properties: {value: a}}\n`

function slowFlood(n: number): string {
  const lines = [HOT, 'resources:']
  for (let i = 0; i < n; i++) lines.push(`  r${i}: {type: OS::Heat::TestResource, properties: {value: v${i}, wait_secs: 1}}`)
  return lines.join('\n') + '\n'
}

/** n/2 roots, and n/2 nodes that each read an attribute of one of them: data flows, and half the nodes are ready at once. */
function busyFlood(n: number): string {
  const lines = [HOT, 'resources:']
  for (let i = 0; i < n / 2; i++) {
    lines.push(`  r${i}: {type: OS::Heat::TestResource, properties: {value: v${i}}}`)
    lines.push(`  s${i}: {type: OS::Heat::TestResource, properties: {value: {get_attr: [r${i}, output]}}}`)
  }
  return lines.join('\n') + '\n'
}

function waitConditions(n: number): string {
  const lines = [HOT, 'resources:']
  for (let i = 0; i < n; i++) {
    lines.push(`  h${i}: {type: OS::Heat::WaitConditionHandle}`)
    lines.push(`  w${i}: {type: OS::Heat::WaitCondition, properties: {handle: {get_resource: h${i}}, timeout: 43200}}`)
  }
  return lines.join('\n') + '\n'
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

async function main() {
  const args = parseArgs(process.argv.slice(2))
  const e = env()
  const { url, stop: stopPg } = await benchDatabase(e, { dir: 'bench-fair-pg', database: 'kiln_bench' })
  const db = createDb(url, { max: 4 })
  await db.pool.query(`TRUNCATE stack, project, worker, job, event_watch CASCADE`)
  const project = async (name: string): Promise<Actor> => {
    const { rows } = await db.pool.query(`INSERT INTO project (name) VALUES ($1) RETURNING id`, [name])
    return { projectId: rows[0].id as string, name }
  }
  const a = await project('a')
  const b = await project('b')
  const registry = createRegistry(builtinTypes())
  const services = createStackService({ db, catalog: typeCatalog(registry), types: registry, limits: { maxTemplateBytes: 64 << 20, maxResourcesPerStack: 100_000 }, defaultTimeoutMins: 120 })
  configureEvaluation(evaluationSettingsFrom(e))
  await checkSubmission({ template: EMPTY_TEMPLATE_SOURCE }, { catalog: typeCatalog(registry), limits: { maxTemplateBytes: 1 << 20, maxResourcesPerStack: 1 }, stackName: 'warm-up' })

  const workers: ChildProcess[] = []
  for (let i = 0; i < args.workers; i++) {
    workers.push(spawn(process.execPath, ['--import', 'tsx', 'worker/main.ts'], {
      env: childEnv({ DATABASE_URL: url, KILN_LOG_LEVEL: 'warn', KILN_WORKER_CONCURRENCY: String(args.concurrency) }),
      stdio: ['ignore', 'inherit', 'inherit'],
    }))
  }
  const listener = new pg.Client({ connectionString: url })
  await listener.connect()
  await listener.query('LISTEN kiln_stack')
  const settled = new Map<string, (s: string) => void>()
  listener.on('notification', (m) => {
    const p = JSON.parse(m.payload ?? '{}') as { traversal_id?: string; action?: string; status?: string }
    if (p.traversal_id) settled.get(p.traversal_id)?.(`${p.action}_${p.status}`)
  })
  await new Promise((r) => setTimeout(r, 2000)) // Timer reason: the workers register and warm their pools.

  /** A's create, submit to settle, in seconds. */
  const createA = async (): Promise<number> => {
    const t0 = performance.now()
    let resolve!: (s: string) => void
    const done = new Promise<string>((r) => (resolve = r))
    const op = await services.create(a, { name: `a-${crypto.randomBytes(4).toString('hex')}`, template: ONE })
    settled.set(op.traversalId!, resolve)
    const { rows } = await db.pool.query('SELECT status FROM stack WHERE id = $1', [op.stack.id])
    if (rows[0].status !== 'IN_PROGRESS') resolve(rows[0].status)
    // Timer reason: a create that never ends (every slot held) is counted as --give-up seconds.
    let giveUp: NodeJS.Timeout | undefined
    const status = await Promise.race([done, new Promise<string>((r) => (giveUp = setTimeout(() => r('GIVEN_UP'), args.giveUpS * 1000)))])
    clearTimeout(giveUp)
    const s = (performance.now() - t0) / 1000
    settled.delete(op.traversalId!)
    if (status === 'GIVEN_UP') {
      console.warn(`A's create was not done after ${args.giveUpS} s`)
      return s
    }
    if (!/COMPLETE/.test(status)) throw new Error(`A's create ended ${status}`)
    await services.delete(a, op.stack.id)
    return s
  }
  // Queued and not claimed (a join to the stack, so the bench also runs on a version whose jobs carry no project).
  const ready = async (projectId: string) => Number((await db.pool.query(`SELECT count(*) AS n FROM job j JOIN stack s ON s.id = j.stack_id WHERE s.project_id = $1 AND j.locked_by IS NULL`, [projectId])).rows[0].n)
  const floods: string[] = []
  const startFlood = async (template: string) => {
    floods.push((await services.create(b, { name: `flood-${crypto.randomBytes(4).toString('hex')}`, template })).stack.id)
    while ((await ready(b.projectId)) < args.flood / 5) await new Promise((r) => setTimeout(r, 20)) // Timer reason: the flood's jobs are being queued.
  }
  const endFloods = async () => {
    const ids = floods.splice(0)
    for (const id of ids) await services.delete(b, id)
    while (Number((await db.pool.query(`SELECT count(*) AS n FROM stack WHERE id = ANY($1) AND status = 'IN_PROGRESS'`, [ids])).rows[0].n) > 0) await new Promise((r) => setTimeout(r, 200)) // Timer reason: the deletes run.
  }
  /** A's creates while B's flood (`template`) keeps at least a fifth of its nodes ready. */
  const underFlood = async (template: string | null): Promise<number[]> => {
    const out: number[] = []
    while (out.length < args.runs) {
      if (template && (await ready(b.projectId)) < args.flood / 5) await startFlood(template)
      out.push(await createA())
    }
    await endFloods()
    return out
  }

  await createA() // warm-up, not measured
  const results: Record<string, number[]> = {}
  results.idle = await underFlood(null)
  const w = await services.create(b, { name: 'waits', template: waitConditions(args.waits) })
  // Every wait condition waiting (parked, or in a worker slot on a version that does not park).
  for (;;) {
    const { rows } = await db.pool.query(`SELECT count(*) AS n FROM resource WHERE stack_id = $1 AND name LIKE 'w%' AND action = 'CREATE' AND status = 'IN_PROGRESS'`, [w.stack.id])
    if (Number(rows[0].n) >= Math.min(args.waits, args.workers * args.concurrency)) break
    await new Promise((r) => setTimeout(r, 200)) // Timer reason: the wait conditions start.
  }
  results.waits = await underFlood(null)
  await services.delete(b, w.stack.id)
  floods.push(w.stack.id)
  await endFloods()
  results.slow = await underFlood(slowFlood(args.flood))
  results.busy = await underFlood(busyFlood(args.flood))

  const idle = median(results.idle)
  const summary = Object.entries(results).map(([name, xs]) => ({ name, medianS: Number(median(xs).toFixed(3)), ratio: Number((median(xs) / idle).toFixed(2)), runsS: xs.map((x) => Number(x.toFixed(3))) }))
  if (args.json) console.log(JSON.stringify({ args, summary }, null, 2))
  else {
    console.log(`A's one-resource create, median of ${args.runs} (${args.workers} workers x ${args.concurrency} slots; B: ${args.waits} waits, floods of ${args.flood} ready nodes)`)
    for (const s of summary) console.log(`  ${s.name.padEnd(6)} ${s.medianS.toFixed(3)} s  ${s.ratio.toFixed(2)}x idle   runs ${s.runsS.join(' ')}`)
  }
  for (const wk of workers) wk.kill('SIGTERM')
  await Promise.all(workers.map((wk) => new Promise((r) => wk.once('exit', r))))
  await listener.end()
  await db.close()
  await stopPg()
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
