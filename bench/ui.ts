/**
 * `npm run bench:ui [-- --repeat 3] [--size 1000] [--delay 0.3] [--big 10000] [--big-delay 0] [--workers 2] [--json] [--profile <dir>]`
 *
 * The live view against the engine, in a real Chromium (Debian's, through
 * playwright-core) on the production build, with `--workers` worker
 * processes, on a dedicated embedded PostgreSQL (<KILN_DATA_DIR>/bench-ui-pg)
 * or the database of DATABASE_URL (emptied first!). Per run:
 *
 * 1. create layered-<size> at D = <delay> s and open its page at once:
 *    first full render (every node drawn, every row in the table) while the
 *    traversal runs, measured from navigation start;
 * 2. open the finished stack again: first full render of an idle stack;
 * 3. with the page open, update all <size> resources and follow it to the end:
 *    - event commit -> on screen: for each event of the update, the time from
 *      the event's own timestamp to the paint that showed it (the page reports
 *      the last event seq it painted), beside the time a plain Node Socket.IO
 *      subscriber received the same event and the time the page's socket did;
 *    - the longest gap between animation frames while events stream;
 *    - bytes the page downloaded (HTTP and WebSocket) during the update, per event;
 *    - frames in which the status badge, progress bar and graph disagreed;
 * 4. layered-<big> (default D = 0): open its page while it is created, time to
 *    the first render of every node (grouped view), and whether the page
 *    follows it to the end.
 *
 * With --repeat k the summary gives medians of the k runs. --profile writes
 * the page's CPU profiles (DevTools format) of the first render and of the
 * update into <dir> and prints where the time went, by script and function.
 * Numbers depend on
 * the machine's load: say what else ran when quoting them.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import os from 'node:os'
import type { Browser, BrowserContext, CDPSession, Page } from 'playwright-core'
import { io, type Socket } from 'socket.io-client'
import { childEnv, env } from '../lib/env'
import { benchDatabase } from './database'
import { createLogger } from '../lib/logger'
import { createDb } from '../lib/db/client'
import { createToken } from '../lib/auth/tokens'
import type { StackEventMessage } from '../lib/realtime/contracts'
import { ensureBuild } from '../scripts/build-stamp'
import { findChromium, launchChromium } from '../test/helpers/browser'
import { benchTemplate } from './shapes'
import { profilePage } from './ui-profile'
import { percentiles, probeScript, shownTimes, type ProbeState } from './ui-probe'

interface Args {
  repeat: number
  size: number
  delay: number
  big: number
  bigDelay: number
  workers: number
  json: boolean
  profile: string | null
}

function parseArgs(argv: string[]): Args {
  const get = (flag: string) => {
    const i = argv.indexOf(flag)
    return i >= 0 ? argv[i + 1] : undefined
  }
  return {
    repeat: Math.max(1, Number(get('--repeat') ?? 1)),
    size: Number(get('--size') ?? 1000),
    delay: Number(get('--delay') ?? 0.3),
    big: Number(get('--big') ?? 10000),
    bigDelay: Number(get('--big-delay') ?? 0),
    workers: Number(get('--workers') ?? 2),
    json: argv.includes('--json'),
    profile: get('--profile') ?? null,
  }
}

interface RunFigures {
  createS: number
  firstRenderRunningMs: number | null
  /** the same update replayed at 1x on the page with the engine idle: longest frame, frames over 100 ms */
  replayMaxFrameMs: number | null
  replayFramesOver100: number | null
  /** the browser's frames over 100 ms: [duration, script, rendering] ms */
  longFrames: [number, number, number, string][]
  firstRenderIdleMs: number | null
  updateS: number
  events: number
  pageLatency: ReturnType<typeof percentiles>
  plainLatency: ReturnType<typeof percentiles>
  /** event commit -> the batch holding it arrived on the page's socket */
  receivedLatency: ReturnType<typeof percentiles>
  eventsNeverShown: number
  maxFrameMs: number
  framesOver100: number
  httpBytes: number
  wsBytes: number
  httpRequests: number
  bytesPerEvent: number
  disagreeFrames: number
  agreementSamples: number
  disagreeExamples: string[]
  bigNodes: number
  bigFirstRenderMs: number | null
  bigFollowed: boolean
  bigCreateS: number
}

/** Events of one stack as a plain Node Socket.IO subscriber receives them. */
class Subscriber {
  readonly events: (StackEventMessage & { receivedAt: number })[] = []
  private waiters = new Set<() => void>()
  constructor(private readonly socket: Socket) {
    socket.on('stack:events', (msg: { events: StackEventMessage[] }) => {
      const now = Date.now()
      for (const e of msg.events) this.events.push({ ...e, receivedAt: now })
      for (const w of this.waiters) w()
    })
  }
  static async open(url: string, token: string, stackId: string): Promise<Subscriber> {
    const socket = io(url, { transports: ['websocket'], auth: { token } })
    const sub = new Subscriber(socket)
    await new Promise<void>((resolve, reject) => {
      socket.once('connect_error', reject)
      socket.once('connect', () => socket.emit('stack:subscribe', stackId, (r: { ok: boolean; error?: string }) => (r.ok ? resolve() : reject(new Error(r.error)))))
    })
    return sub
  }
  /** The stack event that ended `traversalId` (woken by each delivery). */
  async settled(traversalId: string, timeoutMs: number): Promise<StackEventMessage> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const end = this.events.find((e) => e.kind === 'stack' && e.traversalId === traversalId && e.status !== 'IN_PROGRESS')
      if (end) return end
      if (Date.now() > deadline) throw new Error(`traversal ${traversalId} did not settle within ${timeoutMs} ms`)
      await new Promise<void>((r) => {
        const t = setTimeout(r, 1000)
        this.waiters.add(() => {
          clearTimeout(t)
          r()
        })
      })
      this.waiters.clear()
    }
  }
  close() {
    this.socket.close()
  }
}

/**
 * The page's own share of the frames: the update just followed, replayed on
 * the same page at 1x (the replay folds each 100 ms of events into the graph
 * and the table the way the live view does) while the engine is idle, so the
 * page has the cores to itself. Null when the page has no replay.
 */
async function replayFrames(page: Page, seconds: number): Promise<{ maxFrameMs: number; framesOver100: number } | null> {
  const play = page.getByRole('button', { name: 'play the replay' })
  if (!(await play.count())) return null
  await page.getByLabel('replay speed').selectOption('1')
  await page.evaluate(() => {
    const p = (window as unknown as { __kilnProbe: ProbeState }).__kilnProbe
    Object.assign(p, { maxGap: 0, gapsOver100: 0, longFrames: [], measuring: true })
  })
  await play.click()
  await page.getByRole('button', { name: 'pause the replay' }).waitFor({ timeout: 10_000 })
  // It ends by itself after the update's duration: the button offers play again.
  await play.waitFor({ timeout: (seconds + 60) * 1000 })
  const p = await page.evaluate(() => {
    const p = (window as unknown as { __kilnProbe: ProbeState }).__kilnProbe
    p.measuring = false
    return { maxGap: p.maxGap, gapsOver100: p.gapsOver100 }
  })
  return { maxFrameMs: Math.round(p.maxGap), framesOver100: p.gapsOver100 }
}

/**
 * Deletes a stack and waits for the delete to end: a delete of 10,000
 * resources still running would share the cores with the next measurement.
 */
async function deleteAndWait(h: { call: (m: string, p: string, b?: unknown) => Promise<any>; base: string; token: string }, stackId: string): Promise<void> {
  const sub = await Subscriber.open(h.base, h.token, stackId)
  try {
    const del = await h.call('DELETE', `/api/stacks/${stackId}`)
    if (del?.traversalId) await sub.settled(del.traversalId as string, 600_000)
  } finally {
    sub.close()
  }
}

/** Bytes the page downloads from now on (HTTP bodies as sent, WebSocket frames), through the DevTools protocol. */
async function countBytes(page: Page): Promise<{ cdp: CDPSession; read(): { http: number; ws: number; requests: number; byPath: Record<string, number> } }> {
  const cdp = await page.context().newCDPSession(page)
  await cdp.send('Network.enable')
  let http = 0
  let ws = 0
  let requests = 0
  const byPath: Record<string, number> = {}
  const urls = new Map<string, string>()
  cdp.on('Network.requestWillBeSent', (e) => urls.set(e.requestId, new URL(e.request.url).pathname.replace(/[0-9a-f-]{36}/g, ':id')))
  cdp.on('Network.loadingFinished', (e) => {
    http += e.encodedDataLength
    requests++
    const p = urls.get(e.requestId) ?? '?'
    byPath[p] = (byPath[p] ?? 0) + e.encodedDataLength
  })
  cdp.on('Network.webSocketFrameReceived', (e) => (ws += e.response.payloadData.length))
  return { cdp, read: () => ({ http, ws, requests, byPath }) }
}

const probe = (page: Page) => page.evaluate(() => (window as unknown as { __kilnProbe: ProbeState }).__kilnProbe)

/** Resolves when the page's first full render happened (or null after `timeoutMs`), in ms after navigation start. */
async function firstRender(page: Page, timeoutMs: number): Promise<number | null> {
  try {
    await page.waitForFunction(() => (window as unknown as { __kilnProbe?: ProbeState }).__kilnProbe?.readyAt != null, null, { timeout: timeoutMs, polling: 100 })
  } catch {
    return null
  }
  return page.evaluate(() => Math.round((window as unknown as { __kilnProbe: ProbeState }).__kilnProbe.readyAt! - performance.timeOrigin))
}

async function main() {
  const args = parseArgs(process.argv.slice(2))
  const e = env()
  const log = createLogger({ level: 'warn', format: 'text' })
  const chromium = findChromium()
  if (!chromium) throw new Error("no Chromium found (install Debian's chromium package or set KILN_CHROMIUM_PATH)")

  const { url, stop: stopPg } = await benchDatabase(e, { dir: 'bench-ui-pg', database: 'kiln_bench_ui' })
  const db = createDb(url, { max: 2 })
  await db.pool.query(`TRUNCATE stack, project, worker, job, event_watch CASCADE`)
  const { rows } = await db.pool.query(`INSERT INTO project (name) VALUES ('bench-ui') RETURNING id`)
  const token = (await createToken(db, rows[0].id, 'bench-ui', { role: 'admin' })).secret
  await ensureBuild(log)

  const children: ChildProcess[] = []
  const limits = { KILN_MAX_TEMPLATE_BYTES: String(64 << 20), KILN_MAX_BODY_BYTES: String(64 << 20), KILN_LOG_LEVEL: 'warn' }
  const web = spawn(process.execPath, ['--import', 'tsx', 'server.ts'], {
    env: childEnv({ DATABASE_URL: url, NODE_ENV: 'production', PORT: '0', HOST: '127.0.0.1', NEXT_TELEMETRY_DISABLED: '1', ...limits }),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  children.push(web)
  const base = await new Promise<string>((resolve, reject) => {
    web.on('message', (m: { kind?: string; url?: string }) => m.kind === 'ready' && m.url && resolve(m.url))
    web.once('exit', (code) => reject(new Error(`the web server exited (${code})`)))
  })
  for (let i = 0; i < args.workers; i++)
    children.push(spawn(process.execPath, ['--import', 'tsx', 'worker/main.ts'], { env: childEnv({ DATABASE_URL: url, ...limits }), stdio: ['ignore', 'inherit', 'inherit'] }))
  for (;;) {
    const { rows: w } = await db.pool.query(`SELECT count(*)::int AS n FROM worker WHERE stopped_at IS NULL`)
    if (w[0].n >= args.workers) break
    await new Promise((r) => setTimeout(r, 100))
  }

  const call = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(base + p, { method, headers: { 'content-type': 'application/json', 'x-auth-token': token }, body: body === undefined ? undefined : JSON.stringify(body) })
    const parsed = await res.json().catch(() => null)
    if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(parsed)}`)
    return parsed
  }

  const browser: Browser = await launchChromium(chromium)
  const runs: RunFigures[] = []
  try {
    for (let rep = 0; rep < args.repeat; rep++) {
      const ctx: BrowserContext = await browser.newContext({ baseURL: base, viewport: { width: 1440, height: 900 } })
      await ctx.request.post('/api/session', { data: { token } })
      runs.push(await oneRun(ctx, args, rep, { call, base, token }))
      await ctx.close()
    }
  } finally {
    await browser.close()
    for (const c of children) c.kill('SIGTERM')
    await Promise.all(children.map((c) => (c.exitCode === null ? new Promise((r) => c.once('exit', r)) : null)))
    await db.close()
    await stopPg()
  }
  report(args, runs)
}

async function oneRun(ctx: BrowserContext, args: Args, rep: number, h: { call: (m: string, p: string, b?: unknown) => Promise<any>; base: string; token: string }): Promise<RunFigures> {
  const say = (s: string) => !args.json && console.log(`[run ${rep + 1}] ${s}`)
  const page = await ctx.newPage()
  await page.addInitScript({ content: probeScript(args.size) })
  const name = `ui-${rep}-${Date.now().toString(36)}`

  // 1. Create, and open the page at once: the first render while the traversal runs.
  const created = await h.call('POST', '/api/stacks', { name, template: benchTemplate('layered', args.size, args.delay, { value: 'a', replace: false }) })
  const stackId = created.stack.id as string
  const createdAt = Date.now()
  const sub = await Subscriber.open(h.base, h.token, stackId)
  const profiled = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    if (!args.profile) return fn()
    const stop = await profilePage(page, args.profile, `run${rep + 1}-${name}`)
    const out = await fn()
    say(await stop())
    return out
  }
  const firstRenderRunningMs = await profiled('first-render', async () => {
    await page.goto(`/stacks/${stackId}`)
    return firstRender(page, 120_000)
  })
  const marks = async () => {
    // The document's own timing first (server response, scripts parsed), then the page's marks.
    const nav = await page.evaluate(() => {
      const n = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming | undefined
      return n ? { html: Math.round(n.responseEnd), interactive: Math.round(n.domInteractive), loaded: Math.round(n.loadEventEnd) } : null
    })
    const page_ = ((await probe(page)).marks ?? []).map(([k, v]) => `${k} ${v}`).join(', ')
    return `${nav ? `html ${nav.html}, dom ${nav.interactive}, scripts ${nav.loaded}, ` : ''}${page_}`
  }
  say(`first render while creating: ${firstRenderRunningMs} ms (${await marks()})`)
  await sub.settled(created.traversalId, 300_000)
  const createS = (Date.now() - createdAt) / 1000

  // 2. The finished stack, opened again.
  await page.goto('about:blank')
  await page.goto(`/stacks/${stackId}`)
  const firstRenderIdleMs = await firstRender(page, 120_000)
  say(`first render of the idle stack: ${firstRenderIdleMs} ms (${await marks()})`)

  // 3. An update of every resource, followed with the page open.
  const net = await countBytes(page)
  await page.evaluate(() => {
    const p = (window as unknown as { __kilnProbe: ProbeState }).__kilnProbe
    p.shown = []
    p.received = []
    p.measuring = true
  })
  const updateStarted = Date.now()
  const { upd, end } = await profiled('update', async () => {
    const upd = await h.call('PUT', `/api/stacks/${stackId}`, { template: benchTemplate('layered', args.size, args.delay, { value: 'b', replace: false }) })
    return { upd, end: await sub.settled(upd.traversalId, 300_000) }
  })
  const updateS = (Date.now() - updateStarted) / 1000
  // The page has the whole update once it painted the settling event (or gave up after a minute).
  await page
    .waitForFunction((seq) => (window as unknown as { __kilnProbe: ProbeState }).__kilnProbe.shown.some(([s]) => s >= seq), end.seq, { timeout: 60_000, polling: 100 })
    .catch(() => say('the page did not show the end of the update within 60 s'))
  // A second more of frames after the end: a late, long frame counts.
  await page.waitForTimeout(1000)
  const p = await probe(page)
  await page.evaluate(() => ((window as unknown as { __kilnProbe: ProbeState }).__kilnProbe.measuring = false))
  const bytes = net.read()
  await net.cdp.detach()
  const evs = sub.events.filter((x) => x.traversalId === upd.traversalId)
  const shown = shownTimes(p.shown, evs.map((x) => x.seq))
  const pageLat = evs.flatMap((x) => (shown.has(x.seq) ? [shown.get(x.seq)! - Date.parse(x.at)] : []))
  const plainLat = evs.map((x) => x.receivedAt - Date.parse(x.at))
  const received = shownTimes(p.received, evs.map((x) => x.seq))
  const receivedLat = evs.flatMap((x) => (received.has(x.seq) ? [received.get(x.seq)! - Date.parse(x.at)] : []))
  say(`update: ${evs.length} events in ${updateS.toFixed(1)} s; HTTP ${JSON.stringify(bytes.byPath)}`)
  const replay = await replayFrames(page, updateS)
  say(`long frames [ms: total = script + style/layout/paint + other (scripts)]:\n${p.longFrames.map(([d, sc, r, top]) => `    ${d} = ${sc} + ${r} + ${Math.max(0, d - sc - r)} (${top})`).join('\n') || 'none'}`)
  sub.close()

  // 4. The big stack: grouped view while it is created.
  await page.goto('about:blank')
  await deleteAndWait(h, stackId)
  let bigFirstRenderMs: number | null = null
  let bigFollowed = false
  let bigCreateS = 0
  if (args.big > 0) {
    const bigPage = await ctx.newPage()
    await bigPage.addInitScript({ content: probeScript(args.big) })
    const big = await h.call('POST', '/api/stacks', { name: `${name}-big`, template: benchTemplate('layered', args.big, args.bigDelay, { value: 'a', replace: false }) })
    const bigStarted = Date.now()
    const bigSub = await Subscriber.open(h.base, h.token, big.stack.id)
    await bigPage.goto(`/stacks/${big.stack.id}`)
    bigFirstRenderMs = await firstRender(bigPage, 60_000)
    const bigEnd = await bigSub.settled(big.traversalId, 600_000)
    bigCreateS = (Date.now() - bigStarted) / 1000
    bigFollowed = await bigPage
      .waitForFunction((seq) => (window as unknown as { __kilnProbe: ProbeState }).__kilnProbe.shown.some(([s]) => s >= seq), bigEnd.seq, { timeout: 60_000, polling: 250 })
      .then(() => true, () => false)
    const bigMarks = ((await probe(bigPage)).marks ?? []).map(([k, v]) => `${k} ${v}`).join(', ')
    say(`${args.big} nodes: first render ${bigFirstRenderMs} ms (${bigMarks}); followed to the end: ${bigFollowed}`)
    bigSub.close()
    await bigPage.close()
    await deleteAndWait(h, big.stack.id)
  }
  await page.close()

  return {
    createS,
    firstRenderRunningMs,
    firstRenderIdleMs,
    updateS,
    events: evs.length,
    pageLatency: percentiles(pageLat),
    plainLatency: percentiles(plainLat),
    receivedLatency: percentiles(receivedLat),
    eventsNeverShown: evs.length - pageLat.length,
    maxFrameMs: Math.round(p.maxGap),
    framesOver100: p.gapsOver100,
    longFrames: p.longFrames,
    replayMaxFrameMs: replay?.maxFrameMs ?? null,
    replayFramesOver100: replay?.framesOver100 ?? null,
    httpBytes: bytes.http,
    wsBytes: bytes.ws,
    httpRequests: bytes.requests,
    bytesPerEvent: Math.round((bytes.http + bytes.ws) / Math.max(1, evs.length)),
    disagreeFrames: p.disagreements,
    agreementSamples: p.samples,
    disagreeExamples: p.examples,
    bigNodes: args.big,
    bigFirstRenderMs,
    bigFollowed,
    bigCreateS,
  }
}

function median(values: (number | null)[]): number | null {
  const v = values.filter((x): x is number => x !== null && Number.isFinite(x)).sort((a, b) => a - b)
  return v.length ? v[Math.floor((v.length - 1) / 2)]! : null
}

function report(args: Args, runs: RunFigures[]) {
  const m = (f: (r: RunFigures) => number | null) => median(runs.map(f))
  const all = (f: (r: RunFigures) => number | null) => runs.map((r) => f(r) ?? '–').join(', ')
  const summary = {
    machine: { cpus: os.cpus().length, load1: os.loadavg()[0], node: process.version },
    args,
    medians: {
      firstRenderRunningMs: m((r) => r.firstRenderRunningMs),
      firstRenderIdleMs: m((r) => r.firstRenderIdleMs),
      pageP95Ms: m((r) => r.pageLatency.p95),
      pageMaxMs: m((r) => r.pageLatency.max),
      plainP95Ms: m((r) => r.plainLatency.p95),
      receivedP95Ms: m((r) => r.receivedLatency.p95),
      maxFrameMs: m((r) => r.maxFrameMs),
      replayMaxFrameMs: m((r) => r.replayMaxFrameMs),
      bytesPerEvent: m((r) => r.bytesPerEvent),
      disagreeFrames: m((r) => r.disagreeFrames),
      bigFirstRenderMs: m((r) => r.bigFirstRenderMs),
    },
    runs,
  }
  if (args.json) return console.log(JSON.stringify(summary, null, 2))
  const lines = [
    '',
    `UI bench: layered-${args.size} at D = ${args.delay} s, ${args.workers} workers, ${runs.length} run(s); ${os.cpus().length} cores, load ${os.loadavg()[0]!.toFixed(2)} at the end`,
    `  create took ${all((r) => r.createS)} s; update of all ${args.size} took ${all((r) => r.updateS)} s (${all((r) => r.events)} events)`,
    `  first full render, traversal running   ${m((r) => r.firstRenderRunningMs)} ms   (runs: ${all((r) => r.firstRenderRunningMs)})   target <= 1500`,
    `  first full render, idle stack          ${m((r) => r.firstRenderIdleMs)} ms   (runs: ${all((r) => r.firstRenderIdleMs)})   target <= 1500`,
    `  event commit -> on screen, page        p50 ${m((r) => r.pageLatency.p50)} / p95 ${m((r) => r.pageLatency.p95)} / max ${m((r) => r.pageLatency.max)} ms   (p95 runs: ${all((r) => r.pageLatency.p95)}; never shown: ${all((r) => r.eventsNeverShown)})   target p95 <= 250, max <= 1000`,
    `  event commit -> plain subscriber       p50 ${m((r) => r.plainLatency.p50)} / p95 ${m((r) => r.plainLatency.p95)} / max ${m((r) => r.plainLatency.max)} ms`,
    `  event commit -> received by the page   p50 ${m((r) => r.receivedLatency.p50)} / p95 ${m((r) => r.receivedLatency.p95)} / max ${m((r) => r.receivedLatency.max)} ms   (the rest of the page's figure is its own work)`,
    `  longest frame while events stream      ${m((r) => r.maxFrameMs)} ms   (runs: ${all((r) => r.maxFrameMs)}; frames over 100 ms: ${all((r) => r.framesOver100)})   target <= 100`,
    `  the same update replayed at 1x, engine idle: longest frame ${m((r) => r.replayMaxFrameMs)} ms   (runs: ${all((r) => r.replayMaxFrameMs)}; frames over 100 ms: ${all((r) => r.replayFramesOver100)})`,
    `  downloaded during the update           HTTP ${all((r) => r.httpBytes)} B in ${all((r) => r.httpRequests)} requests, WebSocket ${all((r) => r.wsBytes)} B: ${m((r) => r.bytesPerEvent)} B per event`,
    `  badge / progress / graph disagree      ${all((r) => r.disagreeFrames)} of ${all((r) => r.agreementSamples)} frames   target 0`,
    ...runs.flatMap((r, i) => r.disagreeExamples.slice(0, 2).map((x) => `      run ${i + 1}: ${x}`)),
    args.big > 0 ? `  ${args.big} nodes (D = ${args.bigDelay} s): first render ${m((r) => r.bigFirstRenderMs) ?? '> 60000'} ms (runs: ${all((r) => r.bigFirstRenderMs)}), followed to the end: ${runs.map((r) => r.bigFollowed).join(', ')}; create took ${all((r) => r.bigCreateS)} s   target <= 3000` : '',
  ]
  console.log(lines.join('\n'))
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
