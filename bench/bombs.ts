/**
 * `npm run bench:bombs [-- --workers 2] [--json]`
 *
 * Submits each template of the adversarial review's reproductions
 * (bench/bomb-templates.ts) to a real web process (the API as server.ts
 * mounts it: bench/bombs-web.ts) with real worker processes (worker/main.ts),
 * on a dedicated embedded PostgreSQL (.data/bench-bombs-pg), and prints for
 * each: the answer, how long it took, the longest event-loop stall of the web
 * process meanwhile, and the longest of any worker's (both sampled inside the
 * process by perf_hooks.monitorEventLoopDelay, bench/loop-monitor.ts). The
 * run-time bomb also runs a second project's stack beside it and reports how
 * long that took, and whether /api/health answered during a submit bomb.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import path from 'node:path'
import pg from 'pg'
import { createToken } from '../lib/auth/tokens'
import { ensureDatabase } from '../lib/db/bootstrap'
import { startEmbeddedPostgres } from '../lib/db/embedded'
import { createDb } from '../lib/db/client'
import { applyMigrations } from '../lib/db/migrate'
import { childEnv, env } from '../lib/env'
import { chain, deepJson, manyResources, nestedRepeat, redosPattern, runtimeBombs, uniqueSplit, wideRepeat } from './bomb-templates'

interface Proc {
  name: string
  child: ChildProcess
}

interface Row {
  bomb: string
  answer: string
  ms: number
  webStallMs: number
  workerStallMs: number
  note?: string
}

function arg(flag: string): string | undefined {
  const i = process.argv.indexOf(flag)
  return i >= 0 ? process.argv[i + 1] : undefined
}

/** One IPC round trip to a monitored child: reset its loop histogram, or read its longest stall. */
function ask(p: Proc, kind: 'loop:reset' | 'loop:report'): Promise<number> {
  return new Promise((resolve) => {
    const on = (m: { kind?: string; maxMs?: number }) => {
      if (m?.kind !== (kind === 'loop:reset' ? 'loop:reset' : 'loop')) return
      p.child.off('message', on)
      resolve(m.maxMs ?? 0)
    }
    p.child.on('message', on)
    p.child.send({ kind })
  })
}

function monitored(name: string, script: string, url: string, extraEnv: Record<string, string> = {}): Proc {
  const child = spawn(process.execPath, ['--import', 'tsx', '--import', './bench/loop-monitor.ts', script], {
    env: childEnv({ DATABASE_URL: url, KILN_LOG_LEVEL: 'warn', ...extraEnv }),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  return { name, child }
}

function ready(p: Proc): Promise<{ url?: string }> {
  return new Promise((resolve, reject) => {
    p.child.on('message', (m: { kind?: string; url?: string }) => {
      if (m?.kind === 'ready') resolve(m)
    })
    p.child.once('exit', (code) => reject(new Error(`${p.name} exited (${code}) before it was ready`)))
  })
}

async function main() {
  const json = process.argv.includes('--json')
  const nWorkers = Number(arg('--workers') ?? 2)
  const e = env()
  const cluster = await startEmbeddedPostgres({ dataDir: path.join(e.KILN_DATA_DIR, 'bench-bombs-pg') })
  await ensureDatabase(cluster.adminUrl, 'kiln_bombs')
  const url = cluster.databaseUrl('kiln_bombs')
  await applyMigrations(url)
  const kilnDb = createDb(url, { max: 2 })
  const db = kilnDb.pool
  await db.query('TRUNCATE stack, project, worker, job, event_watch CASCADE')
  const project = async (name: string) => {
    const { rows } = await db.query('INSERT INTO project (name) VALUES ($1) RETURNING id', [name])
    return (await createToken(kilnDb, rows[0].id, `${name}-token`)).secret
  }
  const tokenA = await project('bombs-a')
  const tokenB = await project('bombs-b')

  const web = monitored('web', 'bench/bombs-web.ts', url)
  const workers = Array.from({ length: nWorkers }, (_, i) => monitored(`worker ${i + 1}`, 'worker/main.ts', url))
  const base = (await ready(web)).url!
  await Promise.all(workers.map(ready))
  const all = [web, ...workers]

  const listener = new pg.Client({ connectionString: url })
  await listener.connect()
  await listener.query('LISTEN kiln_stack')
  const waiters = new Set<() => void>()
  listener.on('notification', () => {
    for (const w of waiters) w()
    waiters.clear()
  })
  /** Until the stack's operation ends: woken by kiln_stack (sent when an operation settles). */
  const settled = async (stackId: string): Promise<string> => {
    for (;;) {
      const notified = new Promise<void>((r) => waiters.add(r))
      const { rows } = await db.query('SELECT action, status FROM stack WHERE id = $1', [stackId])
      if (rows[0] && rows[0].status !== 'IN_PROGRESS') return `${rows[0].action}_${rows[0].status}`
      // Timer reason: a safety net only; the notification normally wakes us.
      await Promise.race([notified, new Promise((r) => setTimeout(r, 1000))])
    }
  }

  const call = async (method: string, route: string, token: string, body?: unknown) => {
    const res = await fetch(base + route, { method, headers: { 'x-auth-token': token, 'content-type': 'application/json' }, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) })
    const text = await res.text()
    let parsed: any
    try {
      parsed = JSON.parse(text)
    } catch {
      parsed = null
    }
    return { status: res.status, body: parsed }
  }
  const answer = (r: { status: number; body: any }) => {
    const err = r.body?.error
    if (!err) return String(r.status)
    const why = err.budget ? `${err.budget.setting}` : err.limit ? `${err.limit}` : (err.issues?.[0]?.message ?? err.message ?? '').slice(0, 60)
    return `${r.status} ${err.code}: ${why}`
  }

  const rows: Row[] = []
  let n = 0
  /** Run `fn` with every process's loop histogram reset first, and read the stalls after. */
  const measured = async (bomb: string, fn: () => Promise<{ answer: string; note?: string }>) => {
    await Promise.all(all.map((p) => ask(p, 'loop:reset')))
    const t0 = performance.now()
    const out = await fn()
    const ms = performance.now() - t0
    const [webStallMs, ...workerStalls] = await Promise.all(all.map((p) => ask(p, 'loop:report')))
    const row = { bomb, ms: Math.round(ms), webStallMs: Math.round(webStallMs!), workerStallMs: Math.round(Math.max(0, ...workerStalls)), ...out }
    rows.push(row)
    if (!json) console.log(`${row.bomb.padEnd(44)} ${row.answer.padEnd(62)} ${String(row.ms).padStart(6)} ms  web stall ${String(row.webStallMs).padStart(4)} ms  worker stall ${String(row.workerStallMs).padStart(4)} ms${row.note ? `  ${row.note}` : ''}`)
  }
  const submit = (bomb: string, template: string) =>
    measured(bomb, async () => {
      const res = await call('POST', '/api/stacks', tokenA, { name: `bomb-${++n}`, template })
      if (res.status === 201) await settled(res.body.stack.id)
      return { answer: answer(res) }
    })

  await submit('allowed_pattern (a|a)+, 28 a + !', redosPattern(28))
  await submit('allowed_pattern (a|a)+, 100,000 a + !', redosPattern(100_000))
  await submit('nested repeat, 6 levels of 20 (~1 KB)', nestedRepeat(6, 20))
  await submit('repeat, 200,000 combinations', wideRepeat(200_000))
  await submit('repeat, 1,000,000 combinations', wideRepeat(1_000_000))
  await submit('list_concat_unique(str_split), 80,000 items', uniqueSplit(80_000))
  await submit('JSON nested 4,000 deep', deepJson(4000))
  await submit('20,001 resources', manyResources(20_001))

  // /api/health while a bomb is being refused: both sent at once.
  await measured('GET /api/health during the nested repeat', async () => {
    const bomb = call('POST', '/api/stacks', tokenA, { name: `bomb-${++n}`, template: nestedRepeat(6, 20) })
    const t = performance.now()
    const health = await call('GET', '/api/health', tokenA)
    const healthMs = performance.now() - t
    await bomb
    return { answer: `health ${health.status}`, note: `health answered in ${Math.round(healthMs)} ms` }
  })

  // Reads: a stored template whose evaluation is real work, read three times.
  const stored = await call('POST', '/api/stacks', tokenA, { name: `read-${++n}`, template: uniqueSplit(80_000) })
  await settled(stored.body.stack.id)
  for (let i = 1; i <= 3; i++) {
    await measured(`GET /api/stacks/{id} (80,000-item template), #${i}`, async () => ({ answer: answer(await call('GET', `/api/stacks/${stored.body.stack.id}`, tokenA)) }))
  }

  // Run time: the bombs fail their nodes; another project's stack converges beside them.
  await measured('run time: list_concat_unique 80k + repeat 80k x 80k', async () => {
    const a = await call('POST', '/api/stacks', tokenA, { name: `runtime-${++n}`, template: runtimeBombs(80_000) })
    const t = performance.now()
    const b = await call('POST', '/api/stacks', tokenB, { name: `beside-${n}`, template: chain(20, 0.1) })
    const [sa, sb] = await Promise.all([settled(a.body.stack.id), settled(b.body.stack.id).then((s) => ({ s, ms: performance.now() - t }))])
    const res = await call('GET', `/api/stacks/${a.body.stack.id}/resources`, tokenA)
    const byName = Object.fromEntries((res.body.resources as { name: string; status: string; statusReason: string }[]).map((r) => [r.name, r]))
    const bombReason = byName.bomb?.statusReason ?? ''
    return {
      answer: `${sa}; unique ${byName.unique?.status}, bomb ${byName.bomb?.status}`,
      note: `bomb: "${bombReason.slice(0, 90)}"; project B ${sb.s} in ${Math.round(sb.ms)} ms (20 x 0.1 s chain)`,
    }
  })

  if (json) console.log(JSON.stringify(rows, null, 2))
  await listener.end()
  for (const p of all) p.child.kill('SIGTERM')
  await Promise.all(all.map((p) => new Promise((r) => (p.child.exitCode !== null ? r(null) : p.child.once('exit', r)))))
  await kilnDb.close()
  if (cluster.startedHere) await cluster.stop()
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
