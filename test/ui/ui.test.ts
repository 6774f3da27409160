/**
 * The UI in a real Chromium (Debian's package, through playwright-core's
 * executablePath), against the production web process (`server.ts` with the
 * built UI) and real worker processes. Runs when Chromium is installed, and
 * always in CI (KILN_REQUIRE_BROWSER=1), where its absence fails the run.
 *
 * One stack is walked through the whole life the issue describes: created from
 * the editor, watched running -> complete and replayed by time, updated while
 * an update runs (a node shown blocked with the supersede banner, then
 * retriggered; the superseded traversal opened by deep link), previewed and
 * updated with a replacement, cancelled with and without rollback (keyboard
 * only: submit, cancel, inspect; the graph kept after the cancel), checked,
 * rolled back, deleted. Beside it: a 1,000-resource traversal followed live,
 * a 10,000-resource one in the grouped view, the pages at 390 px wide and in
 * the dark theme, and axe-core on every page. Screenshots of the main states
 * go to test-results/ui/.
 */
import fs from 'node:fs'
import path from 'node:path'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { io as connect } from 'socket.io-client'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { env } from '../../lib/env'
import { makeProject } from '../helpers/api-server'
import { axeViolations } from '../helpers/axe'
import { findChromium, launchChromium } from '../helpers/browser'
import { TestCluster } from '../helpers/cluster'
import { testDatabase, type TestDatabase } from '../helpers/db'
import { startWebServer, type WebServer } from '../helpers/web-server'
import { benchTemplate } from '../../bench/shapes'
import { firstLoadPaths } from '../../components/stack-api'
import { LOOKS } from '../../components/graph-style'
import type { NodeState } from '../../lib/ui/graph-model'

const chromiumPath = findChromium()
const SHOTS = path.join('test-results', 'ui')

/** The node states whose fills the pixel checks look for (light theme). */
const FILLED: NodeState[] = ['not-started', 'waiting', 'ready', 'running', 'complete']
/** After a create: complete nodes drawn (each one's fill is well over a hundred pixels), none in another state. */
const onlyComplete = { 'not-started': 0, waiting: 0, ready: 0, running: 0, complete: expect.toSatisfy((n: number) => n > 1000) }

/**
 * How many pixels of the graph are exactly each state's fill, on Cytoscape's canvases or on the
 * state painter's: what a person sees there, not what the page says it drew.
 */
async function fills(page: Page, on: 'cytoscape' | 'painter'): Promise<Partial<Record<NodeState, number>>> {
  const { px } = await fillsAndDrawn(page, on)
  // a few stray pixels of a fill's colour can come from anti-aliasing: a state counts from a hundred pixels on
  return Object.fromEntries(Object.entries(px).map(([s, n]) => [s, n < 100 ? 0 : n]))
}

/** The fills' pixels and, read in the same task, the node counts by state the graph says it drew. */
async function fillsAndDrawn(page: Page, on: 'cytoscape' | 'painter'): Promise<{ px: Partial<Record<NodeState, number>>; drawn: Partial<Record<NodeState, number>> }> {
  const want = FILLED.map((s) => [s, LOOKS[s].color] as const)
  return page.evaluate(
    ([on, want]) => {
      const host = document.querySelector('[data-testid="graph"]')!
      const canvases = [...host.querySelectorAll('canvas')].filter((c) => (on === 'painter') === c.hasAttribute('aria-hidden'))
      const rgb = want.map(([s, hex]) => [s, parseInt(hex.slice(1), 16)] as const)
      const out: Record<string, number> = Object.fromEntries(want.map(([s]) => [s, 0]))
      for (const c of canvases) {
        if (!c.width || !c.height) continue
        const d = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data
        for (let i = 0; i < d.length; i += 4) {
          if (d[i + 3] !== 255) continue
          const v = (d[i]! << 16) | (d[i + 1]! << 8) | d[i + 2]!
          for (const [s, x] of rgb) if (v === x) out[s]!++
        }
      }
      return { px: out, drawn: JSON.parse(host.getAttribute('data-drawn') ?? '{}') }
    },
    [on, want] as const,
  )
}

/**
 * network waits at a gate: an OS::Heat::WaitCondition, whose create or update holds until its
 * handle has received `count` SUCCESS signals, which the test sends (releaseGate) once it has seen
 * what it came to see. Nothing here lasts for a time: a state the test looks at ("network running",
 * "network blocked") lasts until the test lets it go, however slow the machine. Signals are kept,
 * so an update that raises `count` holds network running again and one that keeps it leaves network
 * alone; a new `timeout` replaces network (it cannot be updated in place), and the replacement's
 * create waits at the same gate. subnet and server take the signals' data (network's `data`) as
 * their value.
 */
const chain = (o: { value: string; count: number; timeout?: number }) => `heat_template_version: 2021-04-16
description: UI test chain, network ${o.value}-net
resources:
  gate:
    type: OS::Heat::WaitConditionHandle
  network:
    type: OS::Heat::WaitCondition
    properties:
      handle: { get_resource: gate }
      count: ${o.count}
      timeout: ${o.timeout ?? 3600}
  subnet:
    type: OS::Heat::TestResource
    properties:
      value: { get_attr: [network, data] }
  server:
    type: OS::Heat::TestResource
    properties:
      value: { get_attr: [subnet, output] }
outputs:
  server_value:
    value: { get_attr: [server, output] }
`

/** A chain with nothing to wait for, for tests that only look at settled stacks. */
const plainChain = (value: string) => `heat_template_version: 2021-04-16
description: UI test chain
resources:
  network:
    type: OS::Heat::TestResource
    properties:
      value: ${value}-net
  subnet:
    type: OS::Heat::TestResource
    properties:
      value: { get_attr: [network, output] }
  server:
    type: OS::Heat::TestResource
    properties:
      value: { get_attr: [subnet, output] }
outputs:
  server_value:
    value: { get_attr: [server, output] }
`

describe.runIf(chromiumPath !== null || env().KILN_REQUIRE_BROWSER)('UI in Chromium', () => {
  let db: TestDatabase
  let c: TestCluster
  let web: WebServer
  let browser: Browser
  let ctx: BrowserContext
  let page: Page
  let a: { projectId: string; token: string }
  let b: { projectId: string; token: string }
  let stackId = ''
  const consoleErrors: string[] = []
  /** Everything the Content-Security-Policy refused on any page of any context (reported by the page itself). */
  const cspViolations: string[] = []

  beforeAll(async () => {
    if (!chromiumPath) throw new Error('KILN_REQUIRE_BROWSER is set but no Chromium was found (install Debian\'s chromium package or set KILN_CHROMIUM_PATH)')
    fs.mkdirSync(SHOTS, { recursive: true })
    db = await testDatabase()
    c = await TestCluster.start(db.url, { workers: 2, leaseMs: 3000 })
    ;[web, browser] = await Promise.all([startWebServer(c), launchChromium(chromiumPath)])
    a = await makeProject(c, 'admin')
    b = await makeProject(c, 'member')
    ctx = await newContext({ viewport: { width: 1500, height: 1000 } })
    page = await ctx.newPage()
    page.on('console', (m) => m.type() === 'error' && consoleErrors.push(m.text()))
    page.on('pageerror', (e) => consoleErrors.push(String(e)))
  }, 180_000)

  afterAll(async () => {
    await browser?.close()
    await web?.close()
    await c?.stop()
    await db?.drop()
  })

  /** A browser context whose pages report every CSP violation (the binding and the listener run outside the page's policy). */
  async function newContext(opts: Parameters<Browser['newContext']>[0] = {}): Promise<BrowserContext> {
    const context = await browser.newContext({ baseURL: web.url, ...opts })
    await context.exposeBinding('__kilnCspViolation', (source, text: string) => void cspViolations.push(`${source.page.url()}: ${text}`))
    await context.addInitScript(() =>
      document.addEventListener('securitypolicyviolation', (e) => (window as unknown as { __kilnCspViolation(t: string): void }).__kilnCspViolation(`${e.violatedDirective} blocked ${e.blockedURI || 'inline'} (${e.sourceFile}:${e.lineNumber})`)),
    )
    return context
  }

  const shot = (name: string) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: false })
  const row = (name: string, extra = '') => page.locator(`[role="table"][aria-label="resources"] [role="row"][data-resource="${name}"]${extra}`)
  const status = () => page.getByTestId('stack-status').first()

  /** Replaces the editor's text the way a user pasting would. */
  async function setTemplate(text: string) {
    const content = page.locator('[data-testid="template-editor"] .cm-content')
    await content.click()
    await page.keyboard.press('ControlOrMeta+a')
    await page.keyboard.press('Delete')
    await page.keyboard.insertText(text)
    await expect.poll(() => content.evaluate((el) => (el as HTMLElement).innerText.replace(/\u00a0/g, ' ').trim())).toBe(text.trim())
  }

  /** axe-core finds nothing on the page as it is now. */
  async function accessible(what: string) {
    expect({ page: what, violations: await axeViolations(page) }).toEqual({ page: what, violations: [] })
  }

  /** Presses Tab until the focused element is the one named (a keyboard user's path to it), at most `max` times. */
  async function tabTo(name: string | RegExp, max = 120, p: Page = page) {
    const matches = (n: string) => (typeof name === 'string' ? n === name : name.test(n))
    for (let i = 0; i < max; i++) {
      await p.keyboard.press('Tab')
      const focused = await p.evaluate(() => {
        const el = document.activeElement as HTMLElement | null
        return el ? (el.getAttribute('aria-label') ?? el.innerText ?? '').trim() : ''
      })
      if (matches(focused)) return
    }
    throw new Error(`${String(name)} not reached with ${max} Tab presses`)
  }
  const focusedTestId = () => page.evaluate(() => document.activeElement?.getAttribute('data-testid') ?? document.activeElement?.tagName ?? null)
  const focusedName = () => page.evaluate(() => { const el = document.activeElement as HTMLElement | null; return el ? (el.getAttribute('aria-label') ?? el.innerText ?? '').trim() : null })
  const drawn = async () => JSON.parse((await page.getByTestId('graph').getAttribute('data-drawn')) ?? '{}')

  /** One more SUCCESS signal to network's gate (the web-chain stack's); `value` goes into network's `data`. */
  async function releaseGate(value: string) {
    const res = await fetch(`${web.url}/api/stacks/${stackId}/resources/gate/signal`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-auth-token': a.token },
      body: JSON.stringify({ id: value, data: `${value}-net` }),
    })
    expect(res.status, await res.text()).toBe(200)
  }

  async function waitStatus(text: string | RegExp, timeout = 30_000) {
    try {
      await expect.poll(() => status().innerText(), { timeout }).toMatch(text)
    } catch (err) {
      // Say whether the page or the engine is behind.
      const id = page.url().split('/').at(-1)!
      throw new Error(`${(err as Error).message}\nin the database: ${JSON.stringify(await c.stack(id).catch(() => null))}\n${await c.dump(id).catch(() => '')}`, { cause: err })
    }
  }

  test('every page is served with a nonce-based Content-Security-Policy and the framing and sniffing headers', async () => {
    const policies: string[] = []
    for (const path of ['/login', '/login']) {
      const res = await page.goto(path)
      const h = res!.headers()
      expect(h['x-frame-options']).toBe('DENY')
      expect(h['x-content-type-options']).toBe('nosniff')
      expect(h['referrer-policy']).toBe('no-referrer')
      expect(h['content-security-policy']).toMatch(/script-src 'self' 'nonce-[A-Za-z0-9+/=]{20,}' 'strict-dynamic'(;|$)/)
      expect(h['content-security-policy']).toContain("frame-ancestors 'none'")
      policies.push(h['content-security-policy']!)
    }
    expect(policies[0]).not.toBe(policies[1]) // a fresh nonce per page
    // the page ran its scripts (hydrated): the form is interactive
    await page.getByLabel('API token').fill('x')
    await expect.poll(() => page.getByRole('button', { name: 'Sign in' }).isEnabled()).toBe(true)
    expect(cspViolations).toEqual([])
  })

  test('log in with a token', async () => {
    // Signed out, the server sends the visitor to the login form at once, its field focused.
    await page.goto('/')
    expect(new URL(page.url()).pathname).toBe('/login')
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe('token')
    expect(await page.locator('#token-hint').innerText()).toMatch(/npm start/)
    await accessible('login')
    await page.getByLabel('API token').fill('not-a-token')
    await page.getByRole('button', { name: 'Sign in' }).click()
    await expect.poll(() => page.locator('p[role="alert"]').innerText()).toMatch(/unknown, revoked or expired/)
    await page.getByLabel('API token').fill(a.token)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.waitForURL((u) => u.pathname === '/')
    await expect.poll(() => page.getByTestId('connection').innerText()).toMatch(/live/)
    await shot('01-stacks-empty')
    await accessible('stacks list')
  })

  test('a template error is shown at its line and column, and nothing is created', async () => {
    await page.goto('/stacks/new')
    const bad = chain({ value: 'x', count: 1 }).replace('value: { get_attr: [subnet, output] }', 'value: { get_attr: [subnett, output] }')
    const line = bad.split('\n').findIndex((l) => l.includes('subnett')) + 1
    await setTemplate(bad)
    const issues = page.getByTestId('template-issues')
    await expect.poll(() => issues.innerText(), { timeout: 10_000 }).toMatch(new RegExp(`line ${line}, column \\d+`))
    expect(await issues.innerText()).toMatch(/subnett/)
    // the editor marks the spot too
    await expect.poll(() => page.locator('.cm-lint-marker-error').count()).toBeGreaterThan(0)
    await page.getByLabel('stack name').fill('bad-stack')
    // The Create button says why it cannot be used yet.
    expect(await page.getByRole('button', { name: 'Create stack' }).isDisabled()).toBe(true)
    expect(await page.locator('#create-why').innerText()).toMatch(/Fix the template problems/)
    await shot('02-template-error')
    await accessible('new stack with a template error')
    const { rows } = await c.db.pool.query(`SELECT count(*)::int AS n FROM stack WHERE name = 'bad-stack'`)
    expect(rows[0].n).toBe(0)
  })

  test('create a stack from the editor and watch its nodes go running -> complete', async () => {
    await setTemplate(chain({ value: 'v1', count: 1 }))
    await page.getByLabel('stack name').fill('web-chain')
    await page.getByRole('button', { name: 'Create stack' }).click()
    await page.waitForURL(/\/stacks\/[0-9a-f-]{36}$/)
    stackId = page.url().split('/').at(-1)!
    // network waits at its gate until the test signals: running, and the nodes after it not started
    await row('network', '[data-state="running"]').waitFor({ timeout: 60_000 })
    await waitStatus('CREATE_IN_PROGRESS')
    await expect.poll(drawn).toEqual({ complete: 1, running: 1, 'not-started': 2 })
    await shot('03-create-running')
    await releaseGate('v1')
    await waitStatus('CREATE_COMPLETE')
    for (const n of ['gate', 'network', 'subnet', 'server']) await row(n, '[data-state="complete"]').waitFor({ timeout: 10_000 })
    await expect.poll(drawn).toEqual({ complete: 4 })
    // the graph drew every node, laid out once
    expect(Number(await page.getByTestId('graph').getAttribute('data-layout-ms'))).toBeGreaterThanOrEqual(0)
    await accessible('stack page')
    // replay by time: at the start nothing is done; played (at 30x) it reaches the end, every node complete
    await page.getByLabel('replay position').fill('0')
    await expect.poll(() => page.locator('[role="row"][data-state="complete"]').count()).toBe(0)
    expect(await page.getByTestId('replay-time').innerText()).toMatch(/^\+0\.0 s of/)
    await page.getByLabel('replay speed').selectOption('30')
    await page.getByRole('button', { name: 'play the replay' }).click()
    await expect.poll(() => page.locator('[role="row"][data-state="complete"]').count(), { timeout: 20_000 }).toBe(4)
    await expect.poll(() => page.getByRole('button', { name: 'play the replay' }).count()).toBe(1)
    await page.getByRole('button', { name: /Back to live|Show the end/ }).click()
    await expect.poll(() => page.getByTestId('replay-time').innerText()).toMatch(/end|live/)
    await expect.poll(() => page.locator('[role="row"][data-state="complete"]').count()).toBe(4)
    await page.getByRole('tab', { name: 'Outputs' }).click()
    await expect.poll(() => page.getByTestId('outputs').innerText()).toMatch(/v1-net/)
  })

  test('an update submitted while one runs supersedes it: a node is shown blocked, then retriggered', async () => {
    await page.reload()
    // count 2: network's update waits at the gate for a second signal, holding its row
    await setTemplate(chain({ value: 'v2', count: 2 }))
    await page.getByRole('button', { name: 'Submit update' }).click()
    await row('network', '[data-state="running"]').waitFor({ timeout: 60_000 })
    await expect.poll(() => page.getByTestId('supersede-note').innerText()).toMatch(/supersedes/)
    // the superseding update finds network's row still held: blocked until the test signals
    await setTemplate(chain({ value: 'v3', count: 2 }))
    await page.getByRole('button', { name: 'Submit (supersede)' }).click()
    await expect.poll(() => page.getByTestId('message').innerText()).toMatch(/superseded traversal/)
    await row('network', '[data-state="blocked"]').waitFor({ timeout: 60_000 })
    // the supersede banner names the older traversal and lists the blocked row
    const banner = page.getByTestId('supersede-banner')
    await expect.poll(() => banner.innerText()).toMatch(/1 row blocked by traversal \S+ \(update started by /)
    expect(await banner.getByRole('button', { name: 'network' }).count()).toBe(1)
    await shot('04-blocked')
    await releaseGate('v2')
    await expect.poll(() => row('network').locator('.notes').innerText(), { timeout: 60_000 }).toMatch(/retriggered/)
    await shot('05-retriggered')
    await waitStatus('UPDATE_COMPLETE', 40_000)
    expect(await row('network').locator('.notes').innerText()).toMatch(/was blocked/)
    // never needlessly replaced: still one row per resource
    const { rows } = await c.db.pool.query(`SELECT name, count(*)::int AS n FROM resource WHERE stack_id = $1 AND NOT (action = 'DELETE' AND status = 'COMPLETE') GROUP BY name`, [stackId])
    expect(Object.fromEntries(rows.map((r) => [r.name, r.n]))).toEqual({ gate: 1, network: 1, subnet: 1, server: 1 })
  })

  test('the superseded traversal opens by deep link, at a moment, with a node inspected', async () => {
    const { rows } = await c.db.pool.query(`SELECT id FROM traversal WHERE stack_id = $1 AND outcome = 'SUPERSEDED' ORDER BY started_at DESC LIMIT 1`, [stackId])
    const superseded = String(rows[0].id)
    await page.goto(`/stacks/${stackId}/traversals/${superseded}?node=network&t=0.5`)
    await expect.poll(() => page.getByTestId('history-banner').innerText()).toMatch(/superseded/)
    await expect.poll(() => page.getByTestId('graph').getAttribute('data-traversal')).toBe(superseded)
    expect(await status().innerText()).toMatch(/UPDATE_SUPERSEDED/)
    await expect.poll(() => page.getByTestId('node-panel').locator('h2').innerText()).toMatch(/network/)
    expect(await page.getByTestId('replay-time').innerText()).toMatch(/^\+0\.5 s/)
    await page.getByRole('tab', { name: 'Template' }).click()
    await expect.poll(() => page.getByTestId('traversal-template').innerText()).toMatch(/network v2-net/)
    await shot('11-superseded-deep-link')
    await accessible('a superseded traversal with the node panel open')
    // Escape closes the panel; the address keeps the moment, drops the node
    await page.keyboard.press('Escape')
    await expect.poll(() => page.getByTestId('node-panel').count()).toBe(0)
    await expect.poll(() => new URL(page.url()).search).toBe('?t=0.5')
    await page.goto(`/stacks/${stackId}`)
  })

  test("the stack page's HTML starts the first load's reads; the page takes their answers and asks for none again", async () => {
    const asked: string[] = []
    const onRequest = (r: { url(): string }) => {
      const u = new URL(r.url())
      if (u.pathname.startsWith('/api/')) asked.push(u.pathname + u.search)
    }
    page.on('request', onRequest)
    try {
      const res = await page.goto(`/stacks/${stackId}`)
      const nonce = /'nonce-([^']+)'/.exec(res!.headers()['content-security-policy'] ?? '')?.[1]
      const html = await res!.text()
      // the script carries the request's nonce (the policy admits nothing else) and names every read
      const script = /<script nonce="([^"]+)">([^<]*__kilnEarlyReads[^<]*)<\/script>/.exec(html)
      expect(script?.[1]).toBe(nonce)
      for (const p of firstLoadPaths(stackId)) expect(script?.[2]).toContain(JSON.stringify(p).slice(1, -1))
      await expect.poll(drawn).toEqual({ complete: 4 })
      await expect.poll(() => page.evaluate(() => '__kilnEarlyReads' in window)).toBe(false)
      // each read once: the page's load took the answers the HTML asked for
      for (const p of firstLoadPaths(stackId)) expect(asked.filter((x) => x === p)).toHaveLength(1)
      expect(cspViolations).toEqual([])
    } finally {
      page.off('request', onRequest)
    }
  })

  test('a traversal that ends while the page loads is shown ended: what happened between its first reads and joining the room is caught up', async () => {
    const call = (method: string, p: string, body?: unknown) =>
      fetch(`${web.url}${p}`, { method, headers: { 'content-type': 'application/json', 'x-auth-token': a.token }, body: body === undefined ? undefined : JSON.stringify(body) })
    const res = await call('POST', '/api/stacks', { name: 'ends-while-loading', template: chain({ value: 'e1', count: 1 }) })
    expect(res.status).toBe(201)
    const id = (await res.json()).stack.id as string
    const p = await ctx.newPage()
    try {
      // The first reads are answered as the stack stands now (its create held at the gate), but handed to the page later.
      const held: (() => Promise<void>)[] = []
      const reads = new Set(firstLoadPaths(id))
      await p.route((u) => reads.has(u.pathname + u.search), async (route) => {
        const answer = await route.fetch()
        const body = await answer.body()
        held.push(() => route.fulfill({ response: answer, body }))
      })
      // The page's joining of the stack's room waits too; the server's answer says from which event the room sends.
      const joins: string[] = []
      let toServer: ((m: string) => void) | null = null
      let joined = 0
      let holdJoins = true
      await p.routeWebSocket(/\/socket\.io\//, (ws) => {
        const server = ws.connectToServer()
        toServer = (m) => server.send(m)
        ws.onMessage((m) => (holdJoins && typeof m === 'string' && m.includes('"stack:subscribe"') ? joins.push(m) : server.send(m)))
        server.onMessage((m) => {
          ws.send(m)
          if (typeof m === 'string' && /^43\d+\[\{"ok":true/.test(m)) joined++
        })
      })
      await p.goto(`/stacks/${id}`)
      await expect.poll(() => held.length).toBe(reads.size)
      await expect.poll(() => joins.length).toBeGreaterThan(0)
      // The create ends before the page joins the room: the room will never send its last events.
      const signal = await call('POST', `/api/stacks/${id}/resources/gate/signal`, { id: 'e1', data: 'e1-net' })
      expect(signal.status).toBe(200)
      await expect.poll(async () => (await c.stack(id)).status, { timeout: 30_000 }).toBe('COMPLETE')
      // The page joins while its first reads are still out (it has no position yet when the answer comes) ...
      holdJoins = false
      for (const m of joins.splice(0)) toServer!(m)
      await expect.poll(() => joined).toBeGreaterThan(0)
      // ... and then gets the answers read before the create ended.
      for (const fulfil of held.splice(0)) await fulfil()
      await expect.poll(() => p.getByTestId('stack-status').first().innerText(), { timeout: 30_000 }).toMatch(/CREATE_COMPLETE/)
      await expect.poll(async () => JSON.parse((await p.getByTestId('graph').getAttribute('data-drawn')) ?? '{}')).toEqual({ complete: 4 })
    } finally {
      await p.close()
    }
  })

  test('preview an update that replaces a resource, submit it, and see the replacement on the graph', async () => {
    // A new timeout replaces network; the replacement's create waits at the gate for a third signal,
    // so the old row stays "replaced" (its dependents have not moved yet) until the test signals.
    await setTemplate(chain({ value: 'v4', count: 3, timeout: 1800 }))
    await page.getByRole('button', { name: 'Preview' }).click()
    const pv = page.getByTestId('preview')
    await expect.poll(() => pv.locator('[data-preview="network"]').getAttribute('data-action')).toBe('replace')
    await shot('06-preview-replace')
    await page.getByRole('button', { name: 'Submit update' }).click()
    await row('network', '[data-state="replaced"]').waitFor({ timeout: 60_000 })
    await row('network', '[data-state="running"]').waitFor({ timeout: 60_000 })
    expect(await row('network').count()).toBe(2)
    await releaseGate('v4')
    await waitStatus('UPDATE_COMPLETE', 60_000)
    await expect.poll(async () => (await row('network').locator('.notes').allInnerTexts()).join('|'), { timeout: 10_000 }).toMatch(/replaces #\d+/)
    await shot('07-replaced')
  })

  test('cancel with rollback, then cancel without rollback', async () => {
    // count 4: network's update waits at the gate for a fourth signal
    await setTemplate(chain({ value: 'v5', count: 4, timeout: 1800 }))
    await page.getByRole('button', { name: 'Submit update' }).click()
    await row('network', '[data-state="running"]').waitFor({ timeout: 60_000 })
    await page.getByRole('button', { name: 'Cancel…' }).click()
    await page.getByRole('button', { name: 'Cancel and roll back' }).click()
    // The rollback waits for network's row, which the cancelled update's wait still holds; the signal
    // lets that wait finish, and the rollback goes on.
    await waitStatus('ROLLBACK_IN_PROGRESS')
    await releaseGate('v5')
    await waitStatus('ROLLBACK_COMPLETE', 60_000)
    // The rollback changed the template under the open editor: the page says so before anything is submitted.
    await page.getByTestId('template-changed').waitFor({ timeout: 15_000 })
    await page.getByRole('button', { name: 'Keep my edit' }).click()

    // Keyboard only from here: submit, cancel, inspect. network's update waits at the gate (count 5)
    // for as long as the keyboard takes to get to Cancel; the test signals only after the cancel.
    await setTemplate(chain({ value: 'v6', count: 5, timeout: 1800 }))
    await tabTo('Submit update')
    await page.keyboard.press('Enter')
    // after Submit, focus lands on the result
    await expect.poll(focusedTestId).toBe('message')
    expect(await page.getByTestId('message').innerText()).toMatch(/Update submitted/)
    await row('network', '[data-state="running"]').waitFor({ timeout: 60_000 })
    const cancelled = (await c.stack(stackId)).currentTraversalId
    await tabTo('Cancel…')
    await page.keyboard.press('Enter')
    // the dialog is modal: focus is inside it; Escape closes it and focus returns to the button
    await expect.poll(focusedName).toBe('Keep running')
    await accessible('cancel dialog')
    await page.keyboard.press('Escape')
    await expect.poll(() => page.locator('dialog[open]').count()).toBe(0)
    await expect.poll(focusedName).toBe('Cancel…')
    await page.keyboard.press('Enter')
    await expect.poll(focusedName).toBe('Keep running')
    await page.keyboard.press('Shift+Tab')
    expect(await focusedName()).toBe('Cancel without rollback')
    await page.keyboard.press('Enter')
    await expect.poll(focusedTestId).toBe('message')
    // cancelled reads as cancelled, not as a failure
    await waitStatus('UPDATE_CANCELLED', 30_000)
    expect(await page.getByTestId('status-reason').innerText()).toMatch(/cancel/i)
    // The graph stays: the rows that never started are skipped; the running one goes on (still at its
    // gate) and finishes once signalled.
    expect(await page.getByTestId('graph').getAttribute('data-traversal')).toBe(cancelled)
    await expect.poll(drawn).toEqual({ complete: 1, running: 1, skipped: 2 })
    expect(await row('network').getAttribute('data-state')).toBe('running')
    await releaseGate('v6')
    await expect.poll(drawn, { timeout: 60_000 }).toEqual({ complete: 2, skipped: 2 })
    await row('network', '[data-state="complete"]').waitFor()
    for (const n of ['subnet', 'server']) await row(n, '[data-state="skipped"]').waitFor()
    expect(await page.getByTestId('replay').count()).toBe(1)
    await shot('12-cancelled-graph-kept')
    // inspect a row from the keyboard: focus moves into the drawer, Escape returns it to the row
    await tabTo(/^inspect subnet/, 200)
    await page.keyboard.press('Enter')
    await expect.poll(focusedName).toBe('close the resource panel')
    expect(await page.getByTestId('node-reason').innerText()).toMatch(/not run: the traversal was cancelled first/)
    await page.keyboard.press('Escape')
    await expect.poll(() => page.getByTestId('node-panel').count()).toBe(0)
    expect(await focusedName()).toMatch(/^inspect subnet/)
    await page.getByRole('tab', { name: 'Traversals' }).click()
    await expect.poll(() => page.getByTestId('traversals').locator('tbody tr').count()).toBeGreaterThanOrEqual(6)
    await shot('08-cancelled')
  })

  test('check, then roll back, from the buttons', async () => {
    await page.getByRole('button', { name: 'Check', exact: true }).click()
    await waitStatus('CHECK_COMPLETE', 30_000)
    await page.getByRole('button', { name: 'Rollback' }).click()
    await waitStatus('ROLLBACK_COMPLETE', 45_000)
  })

  test('the dark theme: the toggle switches it, every page stays readable (axe-core)', async () => {
    await page.getByRole('button', { name: 'switch to the dark theme' }).click()
    await expect.poll(() => page.evaluate(() => document.documentElement.dataset.theme)).toBe('dark')
    expect(await page.evaluate(() => getComputedStyle(document.body).backgroundColor)).toBe('rgb(11, 18, 32)')
    await page.getByRole('tab', { name: 'Resources' }).click()
    await page.locator('[role="row"][data-resource]').first().waitFor()
    await shot('13-dark')
    await accessible('stack page, dark')
    await page.goto('/')
    await accessible('stacks list, dark')
    await page.getByRole('button', { name: 'switch to the light theme' }).click()
    await expect.poll(() => page.evaluate(() => document.documentElement.dataset.theme)).toBe('light')
  })

  test('390 px wide: no horizontal page scroll on any page, the node drawer included', async () => {
    const phone = await browser.newContext({ baseURL: web.url, viewport: { width: 390, height: 844 }, deviceScaleFactor: 2 })
    await phone.request.post('/api/session', { data: { token: a.token } })
    const p = await phone.newPage()
    const wide = () => p.evaluate(() => Math.max(document.documentElement.scrollWidth, document.body.scrollWidth))
    for (const route of ['/', '/stacks/new', `/stacks/${stackId}`]) {
      await p.goto(route)
      await p.locator('h1').first().waitFor()
      if (route === `/stacks/${stackId}`) await p.locator('[role="row"][data-resource="network"]').waitFor()
      expect({ route, width: await wide() }).toEqual({ route, width: 390 })
    }
    await p.screenshot({ path: path.join(SHOTS, '14-phone-page.png') })
    await p.locator('[role="row"][data-resource="network"] button').click()
    await p.getByTestId('node-panel').waitFor()
    expect(await wide()).toBe(390)
    await p.screenshot({ path: path.join(SHOTS, '14-phone.png') })
    expect({ violations: await axeViolations(p) }).toEqual({ violations: [] })
    await phone.close()
  })

  test('two sessions edit the same stack: the second learns the template changed, its Submit gets the conflict view and overwrites nothing', async () => {
    const res = await fetch(`${web.url}/api/stacks`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-auth-token': a.token }, body: JSON.stringify({ name: 'two-editors', template: plainChain('base') }) })
    expect(res.status).toBe(201)
    const id = (await res.json()).stack.id as string
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    const sessions = await Promise.all([0, 1].map(async () => {
      const context = await newContext({ viewport: { width: 1500, height: 1000 } })
      const p = await context.newPage()
      p.on('pageerror', (e) => consoleErrors.push(String(e)))
      await p.goto('/login')
      await p.getByLabel('API token').fill(a.token)
      await p.getByRole('button', { name: 'Sign in' }).click()
      await p.waitForURL((u) => u.pathname === '/')
      await p.goto(`/stacks/${id}`)
      await p.getByTestId('template-editor').locator('.cm-content').waitFor()
      await expect.poll(() => p.getByTestId('template-editor').innerText()).toMatch(/base-net/)
      return { context, p }
    }))
    const [alice, bob] = sessions as [{ context: BrowserContext; p: Page }, { context: BrowserContext; p: Page }]
    const edit = async (p: Page, text: string) => {
      const content = p.locator('[data-testid="template-editor"] .cm-content')
      await content.click()
      await p.keyboard.press('ControlOrMeta+a')
      await p.keyboard.press('Delete')
      await p.keyboard.insertText(text)
    }
    const traversals = async () => (await c.db.pool.query('SELECT count(*)::int AS n FROM traversal WHERE stack_id = $1', [id])).rows[0].n as number

    await edit(alice.p, plainChain('alice'))
    await edit(bob.p, plainChain('bob'))
    await alice.p.getByRole('button', { name: 'Submit update' }).click()
    await expect.poll(() => alice.p.getByTestId('message').innerText()).toMatch(/Update submitted/)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    // Bob's editor learns that the template changed under it.
    await bob.p.getByTestId('template-changed').waitFor({ timeout: 15_000 })
    const n = await traversals()

    // Bob submits anyway: refused, shown what changed meanwhile, and nothing starts.
    await bob.p.getByRole('button', { name: 'Submit update' }).click()
    const dialog = bob.p.getByTestId('conflict')
    await dialog.waitFor({ timeout: 10_000 })
    expect(await dialog.innerText()).toMatch(/update by .*complete/)
    expect(await dialog.getByLabel('template changes').innerText()).toMatch(/-\s+value: base-net[\s\S]*\+\s+value: alice-net/)
    await bob.p.screenshot({ path: path.join(SHOTS, '11-conflict.png') })
    expect(await traversals()).toBe(n)
    const shown = await fetch(`${web.url}/api/stacks/${id}/outputs`, { headers: { 'x-auth-token': a.token } })
    expect((await shown.json()).outputs.server_value.value).toBe('alice-net')

    // Rebase: Bob's edit beside Alice's template in the merge view, then submitted against it.
    await bob.p.getByRole('button', { name: 'Rebase my edit on it' }).click()
    const merge = bob.p.getByTestId('merge-view')
    await merge.waitFor()
    await expect.poll(() => merge.locator('.cm-changedLine').count()).toBeGreaterThan(0)
    await bob.p.screenshot({ path: path.join(SHOTS, '12-merge.png') })
    await bob.p.getByRole('button', { name: 'Submit update' }).click()
    await expect.poll(() => bob.p.getByTestId('message').innerText()).toMatch(/Update submitted/)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect(await traversals()).toBe(n + 1)
    // Submitting the same again changes nothing and starts nothing.
    await bob.p.getByRole('button', { name: 'Submit update' }).click()
    await bob.p.getByTestId('no-changes').waitFor({ timeout: 10_000 })
    expect(await traversals()).toBe(n + 1)
    for (const s of sessions) await s.context.close()
  })

  test('a second project cannot open the stack page or join its socket room', async () => {
    const other = await newContext()
    const p = await other.newPage()
    await p.goto('/login')
    await p.getByLabel('API token').fill(b.token)
    await p.getByRole('button', { name: 'Sign in' }).click()
    await p.waitForURL((u) => u.pathname === '/')
    await p.goto(`/stacks/${stackId}`)
    await p.getByRole('heading', { name: 'Stack not found' }).waitFor({ timeout: 10_000 })
    expect(await p.locator('body').innerText()).not.toMatch(/web-chain/)
    // The same browser session on the socket: authenticated, but the room stays closed.
    const cookie = (await other.cookies()).map((k) => `${k.name}=${k.value}`).join('; ')
    const s = connect(web.url, { transports: ['websocket'], extraHeaders: { cookie, origin: web.url } })
    const ack = await new Promise<{ ok: boolean; error?: string }>((resolve, reject) => {
      s.on('connect_error', reject)
      s.on('connect', () => s.emit('stack:subscribe', stackId, resolve))
    })
    expect(ack).toEqual({ ok: false, error: 'not found' })
    // and a cookie-authenticated socket from another origin is refused outright
    const hijack = connect(web.url, { transports: ['websocket'], extraHeaders: { cookie, origin: 'http://evil.example' } })
    const refused = await new Promise<string>((resolve) => {
      hijack.on('connect_error', (e) => resolve(e.message))
      hijack.on('connect', () => resolve('connected'))
    })
    expect(refused).toBe('unauthorized')
    s.close()
    hijack.close()
    await other.close()
  })

  test('a 1,000-resource traversal renders in full and converges live on the page', { timeout: 150_000 }, async () => {
    const res = await fetch(`${web.url}/api/stacks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-auth-token': a.token },
      body: JSON.stringify({ name: 'big-layered', template: benchTemplate('layered', 1000, 0.3, { value: 'a', replace: false }) }),
    })
    expect(res.status).toBe(201)
    const big = (await res.json()).stack.id as string
    const started = Date.now()
    await page.goto(`/stacks/${big}`)
    // Longest gap between animation frames while events stream in: how responsive the page stays.
    await page.evaluate(() => {
      const w = window as unknown as { __maxGap: number }
      w.__maxGap = 0
      let last = performance.now()
      const tick = (t: number) => {
        w.__maxGap = Math.max(w.__maxGap, t - last)
        last = t
        requestAnimationFrame(tick)
      }
      requestAnimationFrame(tick)
    })
    // The table is virtualised: it holds every row (aria-rowcount counts the header too), the DOM only those in view.
    await expect.poll(() => page.locator('[role="table"][aria-label="resources"]').getAttribute('aria-rowcount'), { timeout: 30_000 }).toBe('1001')
    const firstRenderMs = Date.now() - started
    const layoutMs = Number(await page.getByTestId('graph').getAttribute('data-layout-ms'))
    // Fitted, 1,000 nodes are too small to read: the page's own canvas paints their states (Cytoscape holds them hidden).
    const painter = page.getByTestId('state-canvas')
    await expect.poll(() => painter.getAttribute('data-painted')).toBe('1000')
    await shot('10-layered-1000-far')
    // ... and keeps each node in its current state as steps repaint only what changed: every state's fill covers as many
    // pixels per node as the others (all are the same shape; border styles differ by a few pixels). Usually read while
    // the create runs; nothing here waits for a moment in it, and after its end the same holds.
    await expect.poll(async () => JSON.parse((await page.getByTestId('graph').getAttribute('data-drawn')) ?? '{}').complete ?? 0).toBeGreaterThanOrEqual(50)
    const { px, drawn } = await fillsAndDrawn(page, 'painter')
    const states = FILLED.filter((s) => (drawn[s] ?? 0) >= 20)
    const perNode = states.reduce((n, s) => n + px[s]!, 0) / states.reduce((n, s) => n + drawn[s]!, 0)
    for (const s of states) expect({ state: s, within10pc: Math.abs(px[s]! / drawn[s]! - perNode) / perNode < 0.1 }).toEqual({ state: s, within10pc: true })
    // mid-traversal, two steps closer: Cytoscape draws the states again, the nodes that changed meanwhile included
    await page.getByRole('button', { name: 'zoom in' }).click()
    await page.getByRole('button', { name: 'zoom in' }).click()
    await expect.poll(() => painter.getAttribute('data-painted')).toBeNull()
    await shot('10-layered-1000-running')
    await waitStatus('CREATE_COMPLETE', 30_000)
    expect(await page.locator('[role="row"][data-resource]').count()).toBeLessThan(100)
    // the graph shows the same: every one of the 1,000 nodes drawn complete, in Cytoscape's pixels and, fitted again, in the painter's
    await expect.poll(async () => JSON.parse((await page.getByTestId('graph').getAttribute('data-drawn')) ?? '{}')).toEqual({ complete: 1000 })
    await expect.poll(() => fills(page, 'cytoscape')).toMatchObject(onlyComplete)
    await page.getByRole('button', { name: 'Fit', exact: true }).click()
    await expect.poll(() => painter.getAttribute('data-painted')).toBe('1000')
    await expect.poll(() => fills(page, 'painter')).toMatchObject(onlyComplete)
    // a node is tapped where it is painted (Cytoscape holds it hidden meanwhile): its panel opens
    const at = await page.evaluate((hex) => {
      const c = document.querySelector<HTMLCanvasElement>('[data-testid="state-canvas"]')!
      const d = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data
      const want = parseInt(hex.slice(1), 16)
      const r = c.getBoundingClientRect()
      // the middle of the canvas's complete fills: well inside a node, away from the minimap's corner
      for (let y = Math.floor(c.height / 2); y < c.height; y++) {
        for (let x = Math.floor(c.width / 3); x < c.width; x++) {
          const i = 4 * (y * c.width + x)
          if (((d[i]! << 16) | (d[i + 1]! << 8) | d[i + 2]!) === want && d[i + 3] === 255) return { x: r.left + x + 2, y: r.top + y + 2 }
        }
      }
      return null
    }, LOOKS.complete.color)
    expect(at).not.toBeNull()
    await page.mouse.click(at!.x, at!.y)
    await page.getByTestId('node-panel').waitFor()
    await page.getByRole('button', { name: 'close the resource panel' }).click()
    const maxFrameGapMs = Math.round(await page.evaluate(() => (window as unknown as { __maxGap: number }).__maxGap))
    await shot('10-layered-1000')
    const figures = { nodes: 1000, firstRenderMs, layoutMs, maxFrameGapMs }
    fs.writeFileSync(path.join(SHOTS, 'render-1000.json'), JSON.stringify(figures, null, 2))
    console.log(`1,000-node page: ${JSON.stringify(figures)}`)
  })

  test('10,000 resources: a grouped view (by layer) renders and follows the traversal', { timeout: 400_000 }, async () => {
    const res = await fetch(`${web.url}/api/stacks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-auth-token': a.token },
      body: JSON.stringify({ name: 'big-10000', template: benchTemplate('layered', 10_000, 0, { value: 'a', replace: false }) }),
    })
    expect(res.status).toBe(201)
    const big = (await res.json()).stack.id as string
    await page.goto(`/stacks/${big}`)
    const graph = page.getByTestId('graph')
    await expect.poll(() => graph.getAttribute('data-view'), { timeout: 60_000 }).toBe('grouped')
    expect(await graph.getAttribute('data-represented')).toBe('10000')
    expect(await graph.getAttribute('data-units')).toBe('10')
    await shot('15-grouped-10000-running')
    expect(await page.locator('[role="table"][aria-label="resources"]').getAttribute('aria-rowcount')).toBe('10001')
    await waitStatus('CREATE_COMPLETE', 300_000)
    await expect.poll(drawn, { timeout: 60_000 }).toEqual({ complete: 10_000 })
    // a group opens from the keyboard (its button in the group list): its 1,000 nodes are drawn in a box
    await page.getByRole('button', { name: /^open group layer 1 \(1000 nodes, 1000 done\)$/ }).press('Enter')
    await expect.poll(() => graph.getAttribute('data-units')).toBe(String(9 + 1 + 1000))
    await shot('16-grouped-10000-open')
    await page.goto(`/stacks/${stackId}`)
  })

  test('a sensitive output shows ****** until Reveal asks for it by name', async () => {
    const template = `heat_template_version: 2018-08-31
parameters:
  pw: { type: string, hidden: true }
resources:
  v: { type: OS::Heat::Value, properties: { value: { str_replace: { template: 'user:PW@db', params: { PW: { get_param: pw } } } } } }
outputs:
  dsn: { value: { get_attr: [v, value] } }
  open: { value: open-value }
`
    const res = await fetch(`${web.url}/api/stacks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-auth-token': a.token },
      body: JSON.stringify({ name: 'ui-sensitive', template, parameters: { pw: 'ui-s3cret-pass' } }),
    })
    expect(res.status).toBe(201)
    await page.goto(`/stacks/${(await res.json()).stack.id}`)
    await waitStatus('CREATE_COMPLETE')
    await page.getByRole('tab', { name: 'Outputs' }).click()
    await expect.poll(() => page.getByTestId('outputs').innerText()).toMatch(/open-value/)
    expect(await page.getByTestId('outputs').innerText()).toContain('******')
    expect(await page.content()).not.toContain('ui-s3cret-pass')
    await page.getByRole('button', { name: 'Reveal' }).click()
    await expect.poll(() => page.getByTestId('output-dsn-revealed').innerText()).toBe('"user:ui-s3cret-pass@db"')
    await page.getByTestId('outputs').getByRole('button', { name: 'Hide', exact: true }).click()
    await expect.poll(() => page.getByTestId('outputs').innerText()).toContain('******')
    expect(await page.content()).not.toContain('ui-s3cret-pass')
  })

  /** A stack for the drift tests: a file the test edits out of band, a resource that never drifts; `gated`: and a wait condition no one signals. */
  const driftStack = {
    id: '',
    file: 'ui-drift/conf.txt',
    template: (gated = false) => `heat_template_version: 2018-08-31
resources:
  conf:
    type: Kiln::File
    properties: { path: ui-drift/conf.txt, content: "v1" }
  other:
    type: OS::Heat::TestResource
    properties: { value: x }
${gated ? `  handle:
    type: OS::Heat::WaitConditionHandle
  gate:
    type: OS::Heat::WaitCondition
    properties: { handle: { get_resource: handle }, count: 1, timeout: 300 }
` : ''}`,
  }

  test('Check drift marks a file edited out of band on the graph and the table, the panel shows its diff; Submit with converge brings it back, in sync at the next check', async () => {
    const res = await fetch(`${web.url}/api/stacks`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-auth-token': a.token }, body: JSON.stringify({ name: 'ui-drift', template: driftStack.template() }) })
    expect(res.status).toBe(201)
    driftStack.id = (await res.json()).stack.id as string
    expect(await c.settle(driftStack.id)).toBe('CREATE_COMPLETE')
    const file = path.join(c.projectWorkspace(a.projectId), driftStack.file)
    expect(fs.readFileSync(file, 'utf8')).toBe('v1')
    await page.goto(`/stacks/${driftStack.id}`)
    await row('conf', '[data-state="complete"]').waitFor()
    expect(await page.getByTestId('drift-count').count()).toBe(0)

    // Changed outside Kiln; then the check, from the keyboard: a message while it runs and one when it ends.
    fs.writeFileSync(file, 'edited by hand')
    await tabTo('Check drift')
    await page.keyboard.press('Enter')
    await expect.poll(focusedTestId).toBe('message')
    await waitStatus('DRIFT_COMPLETE')
    await expect.poll(() => page.getByTestId('message').innerText()).toMatch(/^Drift check done: 1 drifted \(1 modified, 0 gone\), 1 in sync\./)
    // The table and the graph mark the drifted node, in words too; the other stays unmarked.
    await row('conf', '[data-drift="MODIFIED"]').waitFor()
    expect(await row('conf').getByTestId('drift-badge').innerText()).toMatch(/drifted/)
    expect(await row('other', '[data-drift]').count()).toBe(0)
    await expect.poll(() => page.getByTestId('graph').getAttribute('data-drifted')).toBe(JSON.stringify({ conf: 'modified' }))
    expect(await page.getByTestId('drift-count').innerText()).toMatch(/1 drifted/)
    // the filter shows only the drifted rows
    await page.getByRole('button', { name: 'drifted', exact: true }).click()
    await expect.poll(() => page.locator('[role="row"][data-resource]').count()).toBe(1)
    await page.getByRole('button', { name: 'drifted', exact: true }).click()
    await expect.poll(() => page.locator('[role="row"][data-resource]').count()).toBe(2)
    // the legend explains both marks
    await page.getByText('Legend', { exact: true }).click()
    expect(await page.locator('.legend').innerText()).toMatch(/≠\s*drifted[\s\S]*⊘\s*gone/)
    await shot('17-drift-marked')
    await accessible('stack page with a drifted node')
    await page.getByText('Legend', { exact: true }).click()
    // A stack check (it fails on the drifted file) leaves the finding current: the marks stay on its traversal,
    // and after a reload they come from the resource listing.
    const drift = page.getByTestId('graph').getAttribute('data-traversal')
    await page.getByRole('button', { name: 'Check', exact: true }).click()
    await waitStatus('CHECK_FAILED')
    await expect.poll(() => page.getByTestId('graph').getAttribute('data-traversal')).not.toBe(await drift)
    await row('conf', '[data-state="failed"]').waitFor()
    expect(await page.getByTestId('graph').getAttribute('data-drifted')).toBe(JSON.stringify({ conf: 'modified' }))
    await page.reload()
    await row('conf', '[data-drift="MODIFIED"]').waitFor()
    await expect.poll(() => page.getByTestId('graph').getAttribute('data-drifted')).toBe(JSON.stringify({ conf: 'modified' }))

    // The panel: property, stored, seen.
    await row('conf').getByRole('button', { name: /^inspect conf/ }).click()
    const finding = page.getByTestId('node-drift')
    await expect.poll(() => finding.getAttribute('data-drift')).toBe('MODIFIED')
    await expect.poll(() => finding.locator('tr[data-property="content"]').innerText()).toMatch(/content\s+"v1"\s+"edited by hand"/)
    await shot('18-drift-panel')
    await accessible('the node panel with a drift diff')
    // the same in the dark theme (the drawer covers the header's toggle: closed first)
    await page.keyboard.press('Escape')
    await page.getByRole('button', { name: 'switch to the dark theme' }).click()
    await expect.poll(() => page.evaluate(() => document.documentElement.dataset.theme)).toBe('dark')
    await row('conf').getByRole('button', { name: /^inspect conf/ }).click()
    await page.getByTestId('node-drift').locator('tr[data-property="content"]').waitFor()
    await shot('18-drift-panel-dark')
    await accessible('the node panel with a drift diff, dark')
    await page.keyboard.press('Escape')
    await page.getByRole('button', { name: 'switch to the light theme' }).click()

    // 390 px wide: the marks and the diff fit, nothing scrolls sideways.
    const phone = await browser.newContext({ baseURL: web.url, viewport: { width: 390, height: 844 }, deviceScaleFactor: 2 })
    await phone.request.post('/api/session', { data: { token: a.token } })
    const p = await phone.newPage()
    await p.goto(`/stacks/${driftStack.id}`)
    await p.locator('[role="row"][data-resource="conf"][data-drift="MODIFIED"]').waitFor()
    expect(await p.evaluate(() => Math.max(document.documentElement.scrollWidth, document.body.scrollWidth))).toBe(390)
    await p.screenshot({ path: path.join(SHOTS, '19-drift-phone.png') })
    await p.locator('[role="row"][data-resource="conf"] button').click()
    await p.getByTestId('node-drift').locator('tr[data-property="content"]').waitFor()
    expect(await p.evaluate(() => Math.max(document.documentElement.scrollWidth, document.body.scrollWidth))).toBe(390)
    await p.screenshot({ path: path.join(SHOTS, '19-drift-phone-panel.png') })
    expect({ violations: await axeViolations(p) }).toEqual({ violations: [] })
    await phone.close()

    // Submit the same template with converge (off by default): never "no changes"; the file is written again.
    const converge = page.getByRole('checkbox', { name: 'Converge (bring back drifted resources)' })
    expect(await converge.isChecked()).toBe(false)
    await converge.check()
    await page.getByRole('button', { name: 'Submit update' }).click()
    await expect.poll(() => page.getByTestId('message').innerText()).toMatch(/^Update submitted \(converging drifted resources\)\./)
    await waitStatus('UPDATE_COMPLETE')
    expect(fs.readFileSync(file, 'utf8')).toBe('v1')
    expect(await converge.isChecked()).toBe(false)
    // An operation that changed resources ended the finding: no marks.
    await expect.poll(() => page.getByTestId('graph').getAttribute('data-drifted')).toBe('{}')
    expect(await page.locator('[role="row"][data-drift]').count()).toBe(0)
    expect(await page.getByTestId('drift-count').count()).toBe(0)

    // A new check finds it in sync, and the panel says when.
    await page.getByRole('button', { name: 'Check drift' }).click()
    await waitStatus('DRIFT_COMPLETE')
    await expect.poll(() => page.getByTestId('message').innerText()).toMatch(/^Drift check done: nothing drifted; 2 in sync\./)
    await row('conf').getByRole('button', { name: /^inspect conf/ }).click()
    await expect.poll(() => page.getByTestId('node-drift').innerText()).toMatch(/In sync, checked at /)
    expect(await page.locator('[role="row"][data-drift]').count()).toBe(0)
    await shot('20-drift-in-sync')
    await page.keyboard.press('Escape')
    // After a reload the marks come from the resource listing: still in sync, still unmarked.
    await page.reload()
    await row('conf').getByRole('button', { name: /^inspect conf/ }).click()
    await expect.poll(() => page.getByTestId('node-drift').innerText()).toMatch(/In sync, checked at /)
    await page.keyboard.press('Escape')
  })

  test('Preempt is offered only while an update runs, off by default; sent with the next update, it aborts the action held at a wait condition', async () => {
    expect(await page.getByTestId('preempt').count()).toBe(0)
    // The update holds at a wait condition no one signals.
    await setTemplate(driftStack.template(true))
    await page.getByRole('button', { name: 'Submit update' }).click()
    await row('gate', '[data-state="running"]').waitFor({ timeout: 20_000 })
    const held = (await c.stack(driftStack.id)).currentTraversalId
    const preempt = page.getByRole('checkbox', { name: 'Preempt the running update' })
    expect(await preempt.isChecked()).toBe(false)
    expect(await preempt.evaluate((el) => document.getElementById(el.getAttribute('aria-describedby') ?? '')?.textContent)).toMatch(/Aborts its in-flight actions/)
    await shot('21-preempt-offered')
    await accessible('the editor with the preempt choice')
    // Without the gate again, preempting: the held action is aborted at once, and the update completes.
    await setTemplate(driftStack.template())
    await preempt.check()
    await page.getByRole('button', { name: 'Submit (supersede)' }).click()
    await expect.poll(() => page.getByTestId('message').innerText()).toMatch(/^Update submitted \(preempting the running update\); it superseded traversal /)
    await waitStatus('UPDATE_COMPLETE')
    const aborted = await c.db.pool.query(
      `SELECT reason FROM event WHERE stack_id = $1 AND traversal_id = $2 AND kind = 'resource' AND resource_name = 'gate' AND status = 'FAILED'`,
      [driftStack.id, held],
    )
    expect(aborted.rows.map((r) => r.reason)).toEqual([expect.stringMatching(/^CREATE aborted \(preempted by update /)])
    // Nothing runs: the choice is gone with the operation.
    expect(await page.getByTestId('preempt').count()).toBe(0)
  })

  test('delete with confirmation', async () => {
    await page.goto(`/stacks/${stackId}`)
    await page.getByRole('button', { name: 'Delete…' }).click()
    await page.getByRole('button', { name: 'Delete the stack' }).click()
    await waitStatus('DELETE_COMPLETE', 30_000)
    await shot('09-deleted')
    await page.goto('/')
    await expect.poll(() => page.locator('[data-stack="web-chain"]').count()).toBe(0)
    expect(consoleErrors.filter((e) => !/favicon|status of (400|401|404)/.test(e))).toEqual([])
    // the whole walk (editor, live graph, socket, every page) ran under the policy without a refusal
    expect(cspViolations).toEqual([])
  })
})
