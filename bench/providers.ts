/**
 * `npm run bench:providers [-- --size 1000] [--delay 0.2] [--repeat 3] [--calls 500] [--workers 2] [--json]`
 *
 * What an HTTP resource provider costs, with real worker processes, the
 * example Notes provider (examples/notes/provider.mjs, a process of its own
 * keeping its notes on disk) and a dedicated embedded PostgreSQL
 * (.data/bench-prov-pg) or the database of DATABASE_URL (emptied first!).
 *
 *   layered   `--size` resources in 10 layers, each reading two of the layer
 *             before (data flows: a note's body is made from two notes'
 *             paths); create, then update every body in place. The same
 *             shape of OS::Heat::TestResource with the same action time
 *             (`--delay` seconds: wait_secs, the note's delay_ms) runs in the
 *             same process, interleaved `--repeat` times. Target: the
 *             provider's medians within 1.5x of the test resource's.
 *   protocol  Kiln's side of one action with the provider answering at once:
 *             `--calls` creates through the provider type in this process
 *             (signing, HTTP, checking the reply; the provider's own work is
 *             a file write), one after another. Median and p99.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { childEnv, env } from '../lib/env'
import { benchDatabase } from './database'
import { createDb } from '../lib/db/client'
import { providerSource } from '../lib/db/queries/providers'
import { ProviderTypes } from '../lib/resources/provider/provider-types'
import { outsideRun } from '../lib/resources/outside-run'
import { builtinTypes, createRegistry, typeCatalog, withProviders } from '../lib/resources/registry'
import { createProviderService } from '../lib/services/providers'
import { createStackService, type Actor } from '../lib/services/stacks'
import { configureEvaluation } from '../lib/evaluation/pool'
import { evaluationSettingsFrom } from '../lib/evaluation/settings'
import { silentLogger } from '../lib/logger'

interface Args {
  size: number
  delay: number
  repeat: number
  calls: number
  workers: number
  json: boolean
}

function parseArgs(argv: string[]): Args {
  const get = (flag: string, def: number) => {
    const i = argv.indexOf(flag)
    return i >= 0 ? Number(argv[i + 1]) : def
  }
  return { size: get('--size', 1000), delay: get('--delay', 0.2), repeat: get('--repeat', 3), calls: get('--calls', 500), workers: get('--workers', 2), json: argv.includes('--json') }
}

const SECRET = crypto.randomBytes(24).toString('base64url')
/** Every process this benchmark started, stopped however it ends. */
const workers: ChildProcess[] = []
type Kind = 'test' | 'provider'

/** The layered shape; each resource's text is made from two of the layer before, so values flow. */
function layered(kind: Kind, n: number, delay: number, phase: string): string {
  const perLayer = Math.ceil(n / 10)
  const resources: Record<string, unknown> = {}
  for (let i = 0; i < n; i++) {
    const layer = Math.floor(i / perLayer)
    const deps = layer === 0 ? [] : [...new Set([(layer - 1) * perLayer + (i % perLayer), (layer - 1) * perLayer + ((i + 1) % perLayer)])]
    const read = (j: number) => (kind === 'test' ? { get_attr: [`r${j}`, 'output'] } : { get_attr: [`r${j}`, 'path'] })
    const text = deps.length ? { list_join: [' ', [`${phase}-${i}`, ...deps.map(read)]] } : `${phase}-${i}`
    resources[`r${i}`] = kind === 'test' ? { type: 'OS::Heat::TestResource', properties: { value: text, wait_secs: delay } } : { type: 'Notes::Note', properties: { title: `n${i}`, body: text, delay_ms: Math.round(delay * 1000) } }
  }
  return JSON.stringify({ heat_template_version: '2018-08-31', resources })
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!

async function startNotes(dir: string): Promise<{ url: string; proc: ChildProcess }> {
  const proc = spawn(process.execPath, ['examples/notes/provider.mjs'], { env: childEnv({ NOTES_PORT: '0', NOTES_DIR: dir, NOTES_SECRET: SECRET }), stdio: ['ignore', 'pipe', 'inherit'] })
  const url = await new Promise<string>((resolve, reject) => {
    proc.stdout!.on('data', (d: Buffer) => {
      const m = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(d.toString())
      if (m) resolve(m[1]!)
    })
    proc.on('exit', (code) => reject(new Error(`the Notes provider exited (${code})`)))
  })
  workers.push(proc)
  return { url, proc }
}

async function main() {
  const args = parseArgs(process.argv.slice(2))
  const e = env()
  const { url, stop: stopPg } = await benchDatabase(e, { dir: 'bench-prov-pg', database: 'kiln_bench' })
  const db = createDb(url, { max: 4 })
  await db.pool.query(`TRUNCATE stack, project, worker, job, event_watch, provider CASCADE`)
  const { rows } = await db.pool.query(`INSERT INTO project (name) VALUES ('bench') RETURNING id`)
  const actor: Actor = { projectId: rows[0].id as string, name: 'bench' }
  const notesDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-bench-notes-'))
  const notes = await startNotes(notesDir)

  const providerTypes = new ProviderTypes(providerSource(db.pool))
  const registry = withProviders(createRegistry(builtinTypes()), providerTypes)
  const providers = createProviderService({ db, changed: () => providerTypes.reload() })
  await providers.register({ projectId: actor.projectId, role: 'member' }, { name: 'notes', url: notes.url, prefix: 'Notes', secret: SECRET })
  const services = createStackService({ db, catalog: typeCatalog(registry), types: registry, limits: { maxTemplateBytes: 64 << 20, maxResourcesPerStack: 100_000 }, defaultTimeoutMins: 120 })
  configureEvaluation(evaluationSettingsFrom(e))

  for (let i = 0; i < args.workers; i++) {
    workers.push(spawn(process.execPath, ['--import', 'tsx', 'worker/main.ts'], { env: childEnv({ DATABASE_URL: url, KILN_LOG_LEVEL: 'warn' }), stdio: ['ignore', 'inherit', 'inherit'] }))
  }
  const listener = new pg.Client({ connectionString: url })
  await listener.connect()
  await listener.query('LISTEN kiln_stack')
  const settled = new Map<string, (s: string) => void>()
  listener.on('notification', (m) => {
    const p = JSON.parse(m.payload ?? '{}') as { traversal_id?: string; action?: string; status?: string }
    if (p.traversal_id) settled.get(p.traversal_id)?.(`${p.action}_${p.status}`)
  })
  for (;;) {
    const { rows: w } = await db.pool.query(`SELECT count(*)::int AS n FROM worker WHERE stopped_at IS NULL`)
    if (w[0].n >= args.workers) break
    await new Promise((r) => setTimeout(r, 100)) // Timer reason: the workers register.
  }

  /** Run one operation to its end; seconds from submit to the stack's notification. */
  const timed = async (start: () => Promise<{ traversalId: string | null; stack: { id: string } }>, expect: string): Promise<number> => {
    const t0 = performance.now()
    let resolve!: (s: string) => void
    const done = new Promise<string>((r) => (resolve = r))
    const op = await start()
    settled.set(op.traversalId!, resolve)
    const { rows: s } = await db.pool.query('SELECT action, status FROM stack WHERE id = $1', [op.stack.id])
    if (s[0].status !== 'IN_PROGRESS') resolve(`${s[0].action}_${s[0].status}`)
    const status = await done
    settled.delete(op.traversalId!)
    if (status !== expect) throw new Error(`expected ${expect}, got ${status}`)
    return (performance.now() - t0) / 1000
  }

  const runs: Record<Kind, { create: number[]; update: number[] }> = { test: { create: [], update: [] }, provider: { create: [], update: [] } }
  for (let r = 0; r < args.repeat; r++) {
    for (const kind of ['test', 'provider'] as Kind[]) {
      const name = `${kind}-${r}`
      let id = ''
      runs[kind].create.push(await timed(async () => {
        const op = await services.create(actor, { name, template: layered(kind, args.size, args.delay, 'one') })
        id = op.stack.id
        return op
      }, 'CREATE_COMPLETE'))
      runs[kind].update.push(await timed(() => services.update(actor, id, { template: layered(kind, args.size, args.delay, 'two') }), 'UPDATE_COMPLETE'))
      await timed(() => services.delete(actor, id), 'DELETE_COMPLETE')
    }
  }

  // The protocol's own cost: creates through the provider type in this process, the provider answering at once.
  const note = registry.get('Notes::Note')!
  const perCall: number[] = []
  for (let i = 0; i < args.calls; i++) {
    const uuid = crypto.randomUUID()
    const ctx = { ...outsideRun('the benchmark'), projectId: actor.projectId, stackId: crypto.randomUUID(), stackName: 'bench', resourceName: `n${i}`, resourceUuid: uuid, replacesUuid: null, physicalName: `bench-n${i}`, signal: new AbortController().signal, log: silentLogger, config: { workspaceDir: notesDir }, objects: null as never }
    const t0 = performance.now()
    await note.create(ctx, { title: `n${i}`, body: 'x', delay_ms: 0 })
    perCall.push(performance.now() - t0)
  }

  const summary = {
    size: args.size,
    delaySecs: args.delay,
    repeat: args.repeat,
    create: { testS: median(runs.test.create), providerS: median(runs.provider.create) },
    update: { testS: median(runs.test.update), providerS: median(runs.provider.update) },
    protocolMs: { median: median(perCall), p99: percentile(perCall, 0.99), calls: args.calls },
    runs,
  }
  if (args.json) console.log(JSON.stringify(summary, null, 2))
  else {
    const ratio = (p: number, t: number) => `${(p / t).toFixed(2)}x`
    console.log(`layered-${args.size}, action time ${args.delay} s, medians of ${args.repeat} interleaved runs`)
    console.log(`  create   TestResource ${summary.create.testS.toFixed(2)} s   Notes::Note ${summary.create.providerS.toFixed(2)} s   ${ratio(summary.create.providerS, summary.create.testS)}`)
    console.log(`  update   TestResource ${summary.update.testS.toFixed(2)} s   Notes::Note ${summary.update.providerS.toFixed(2)} s   ${ratio(summary.update.providerS, summary.update.testS)}`)
    console.log(`protocol cost per action (${args.calls} creates, provider answering at once): median ${summary.protocolMs.median.toFixed(2)} ms, p99 ${summary.protocolMs.p99.toFixed(2)} ms`)
  }

  for (const w of workers) w.kill('SIGTERM')
  await Promise.all(workers.map((w) => new Promise((r) => (w.exitCode !== null ? r(null) : w.once('exit', r)))))
  notes.proc.kill('SIGTERM')
  await listener.end()
  await db.close()
  await stopPg()
  fs.rmSync(notesDir, { recursive: true, force: true })
  process.exit(0)
}

main().catch((err) => {
  console.error(err)
  for (const w of workers) w.kill('SIGTERM')
  process.exit(1)
})
