/**
 * What every browser suite of test/ui needs: a real Kiln (a test database,
 * two worker processes, the production web process `server.ts` with the built
 * UI) and a real Chromium (Debian's package, through playwright-core's
 * executablePath), two projects with a token each, one browser context and
 * page, and the page helpers the suites share. The suites run when Chromium
 * is installed, and always in CI (KILN_REQUIRE_BROWSER=1), where its absence
 * fails the run:
 *
 *   describe.runIf(browserSuite)('…', () => {
 *     const ui = useUiSession()
 *     const { c, web, a, row, waitStatus } = ui
 *     let page: Page
 *     beforeAll(() => {
 *       page = ui.page
 *     })
 *     …
 *   })
 *
 * Everything the pages log as an error and every refusal of the
 * Content-Security-Policy is collected (consoleErrors, cspViolations) for the
 * suite to check. Screenshots go to test-results/ui/.
 */
import fs from 'node:fs'
import path from 'node:path'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { env } from '../../lib/env'
import { makeProject } from './api-server'
import { axeViolations } from './axe'
import { findChromium, launchChromium } from './browser'
import type { TestCluster } from './cluster'
import { lateHandle, useKilnEnv } from './stack-env'
import { startWebServer, type WebServer } from './web-server'

export const chromiumPath = findChromium()
/** Whether the browser suites run here: Chromium is installed, or CI requires them (and fails without it). */
export const browserSuite = chromiumPath !== null || env().KILN_REQUIRE_BROWSER
export const SHOTS = path.join('test-results', 'ui')

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
export const chain = (o: { value: string; count: number; timeout?: number }) => `heat_template_version: 2021-04-16
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
export const plainChain = (value: string) => `heat_template_version: 2021-04-16
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

export interface UiSessionOptions {
  /** Sign the page's context in with project A's token before the tests (default true; false: the tests sign in themselves). */
  signedIn?: boolean
}

export interface UiSession {
  /** The worker processes and the database (a stand-in until the suite's beforeAll has run; see stack-env.ts). */
  c: TestCluster
  web: WebServer
  /** Project A (admin token): the page's; project B (member token): another tenant. */
  a: { projectId: string; token: string }
  b: { projectId: string; token: string }
  /** Set by the beforeAll. */
  readonly browser: Browser
  readonly ctx: BrowserContext
  readonly page: Page
  /** Errors the pages logged, and every CSP refusal on any page of any context made by newContext. */
  consoleErrors: string[]
  cspViolations: string[]
  /** A browser context whose pages report every CSP violation (the binding and the listener run outside the page's policy). */
  newContext(opts?: Parameters<Browser['newContext']>[0]): Promise<BrowserContext>
  shot(name: string): Promise<Buffer>
  /** A row of the resources table. */
  row(name: string, extra?: string): ReturnType<Page['locator']>
  status(): ReturnType<Page['locator']>
  /** Replaces the editor's text the way a user pasting would. */
  setTemplate(text: string): Promise<void>
  /** axe-core finds nothing on the page as it is now. */
  accessible(what: string): Promise<void>
  /** Presses Tab until the focused element is the one named (a keyboard user's path to it), at most `max` times. */
  tabTo(name: string | RegExp, max?: number, p?: Page): Promise<void>
  focusedTestId(): Promise<string | null>
  focusedName(): Promise<string | null>
  /** The graph's node counts by state. */
  drawn(): Promise<Record<string, number>>
  /** Waits for the page's stack status; on a time-out, says whether the page or the engine is behind. */
  waitStatus(text: string | RegExp, timeout?: number): Promise<void>
  /** A stack of project A, created over the API. */
  createStack(name: string, template: string, parameters?: Record<string, unknown>): Promise<string>
  /**
   * A `chain` stack of project A, created over the API and complete: network's create waited at the
   * gate until it was running, then got the first signal (`value`).
   */
  createChain(name: string, o: { value: string; timeout?: number }): Promise<string>
  /** One more SUCCESS signal to a chain's gate; `value` goes into network's `data`. */
  releaseGate(stackId: string, value: string): Promise<void>
  /** The signals this session has sent to the stack's gate. */
  signals(stackId: string): number
}

export function useUiSession(opts: UiSessionOptions = {}): UiSession {
  const { cluster: c } = useKilnEnv({ cluster: { workers: 2, leaseMs: 3000 }, api: false, timeoutMs: 180_000 })
  let web: WebServer | undefined
  let browser: Browser | undefined
  let ctx: BrowserContext | undefined
  let page: Page | undefined
  let a: UiSession['a'] | undefined
  let b: UiSession['b'] | undefined
  const sent = new Map<string, number>()
  const consoleErrors: string[] = []
  const cspViolations: string[] = []
  const need = <T>(v: T | undefined, name: string): T => {
    if (v === undefined) throw new Error(`useUiSession: ${name} is used before the suite's beforeAll ran`)
    return v
  }
  const p = () => need(page, 'page')

  beforeAll(async () => {
    if (!chromiumPath) throw new Error('KILN_REQUIRE_BROWSER is set but no Chromium was found (install Debian\'s chromium package or set KILN_CHROMIUM_PATH)')
    fs.mkdirSync(SHOTS, { recursive: true })
    ;[web, browser] = await Promise.all([startWebServer(c), launchChromium(chromiumPath)])
    a = await makeProject(c, 'admin')
    b = await makeProject(c, 'member')
    ctx = await session.newContext({ viewport: { width: 1500, height: 1000 } })
    if (opts.signedIn !== false) expect((await ctx.request.post('/api/session', { data: { token: a.token } })).ok()).toBe(true)
    page = await ctx.newPage()
    page.on('console', (m) => m.type() === 'error' && consoleErrors.push(m.text()))
    page.on('pageerror', (e) => consoleErrors.push(String(e)))
  }, 180_000)

  // Registered after useKilnEnv's: runs before it, as the browser and the web process go before the cluster.
  afterAll(async () => {
    await browser?.close()
    await web?.close()
  })

  const session: UiSession = {
    c,
    web: lateHandle('web', () => web),
    a: lateHandle('a', () => a),
    b: lateHandle('b', () => b),
    get browser() {
      return need(browser, 'browser')
    },
    get ctx() {
      return need(ctx, 'ctx')
    },
    get page() {
      return p()
    },
    consoleErrors,
    cspViolations,
    async newContext(o = {}) {
      const context = await need(browser, 'browser').newContext({ baseURL: need(web, 'web').url, ...o })
      await context.exposeBinding('__kilnCspViolation', (source, text: string) => void cspViolations.push(`${source.page.url()}: ${text}`))
      await context.addInitScript(() =>
        document.addEventListener('securitypolicyviolation', (e) => (window as unknown as { __kilnCspViolation(t: string): void }).__kilnCspViolation(`${e.violatedDirective} blocked ${e.blockedURI || 'inline'} (${e.sourceFile}:${e.lineNumber})`)),
      )
      return context
    },
    shot: (name) => p().screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: false }),
    row: (name, extra = '') => p().locator(`[role="table"][aria-label="resources"] [role="row"][data-resource="${name}"]${extra}`),
    status: () => p().getByTestId('stack-status').first(),
    async setTemplate(text) {
      const content = p().locator('[data-testid="template-editor"] .cm-content')
      await content.click()
      await p().keyboard.press('ControlOrMeta+a')
      await p().keyboard.press('Delete')
      await p().keyboard.insertText(text)
      await expect.poll(() => content.evaluate((el) => (el as HTMLElement).innerText.replace(/\u00a0/g, ' ').trim())).toBe(text.trim())
    },
    async accessible(what) {
      expect({ page: what, violations: await axeViolations(p()) }).toEqual({ page: what, violations: [] })
    },
    async tabTo(name, max = 120, on = p()) {
      const matches = (n: string) => (typeof name === 'string' ? n === name : name.test(n))
      for (let i = 0; i < max; i++) {
        await on.keyboard.press('Tab')
        const focused = await on.evaluate(() => {
          const el = document.activeElement as HTMLElement | null
          return el ? (el.getAttribute('aria-label') ?? el.innerText ?? '').trim() : ''
        })
        if (matches(focused)) return
      }
      throw new Error(`${String(name)} not reached with ${max} Tab presses`)
    },
    focusedTestId: () => p().evaluate(() => document.activeElement?.getAttribute('data-testid') ?? document.activeElement?.tagName ?? null),
    focusedName: () => p().evaluate(() => { const el = document.activeElement as HTMLElement | null; return el ? (el.getAttribute('aria-label') ?? el.innerText ?? '').trim() : null }),
    drawn: async () => JSON.parse((await p().getByTestId('graph').getAttribute('data-drawn')) ?? '{}'),
    async waitStatus(text, timeout = 30_000) {
      try {
        await expect.poll(() => session.status().innerText(), { timeout }).toMatch(text)
      } catch (err) {
        // Say whether the page or the engine is behind.
        const id = p().url().split('/').at(-1)!
        throw new Error(`${(err as Error).message}\nin the database: ${JSON.stringify(await c.stack(id).catch(() => null))}\n${await c.dump(id).catch(() => '')}`, { cause: err })
      }
    },
    async createStack(name, template, parameters) {
      const res = await fetch(`${need(web, 'web').url}/api/stacks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-auth-token': need(a, 'a').token },
        body: JSON.stringify({ name, template, ...(parameters ? { parameters } : {}) }),
      })
      const text = await res.text()
      expect(res.status, text).toBe(201)
      return JSON.parse(text).stack.id as string
    },
    async createChain(name, o) {
      const id = await session.createStack(name, chain({ value: o.value, count: 1, timeout: o.timeout }))
      // The gate takes signals once it is created: while network waits at it.
      const networkState = async () => (await c.db.pool.query(`SELECT action, status FROM resource WHERE stack_id = $1 AND name = 'network'`, [id])).rows[0]
      await c.waitFor(async () => (await networkState())?.status === 'IN_PROGRESS', 60_000, `network of ${name} to wait at its gate`)
      await session.releaseGate(id, o.value)
      expect(await c.settle(id)).toBe('CREATE_COMPLETE')
      return id
    },
    async releaseGate(stackId, value) {
      const res = await fetch(`${need(web, 'web').url}/api/stacks/${stackId}/resources/gate/signal`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-auth-token': need(a, 'a').token },
        body: JSON.stringify({ id: value, data: `${value}-net` }),
      })
      expect(res.status, await res.text()).toBe(200)
      sent.set(stackId, (sent.get(stackId) ?? 0) + 1)
    },
    signals: (stackId) => sent.get(stackId) ?? 0,
  }
  return session
}

/**
 * The suite's last test: no page logged an error (beyond the expected answers
 * of refused requests) and the Content-Security-Policy refused nothing, on
 * any page the suite opened.
 */
export function testCleanPages(ui: Pick<UiSession, 'consoleErrors' | 'cspViolations'>): void {
  test('no page logged an error, and the Content-Security-Policy refused nothing', () => {
    expect(ui.consoleErrors.filter((e) => !/favicon|status of (400|401|404)/.test(e))).toEqual([])
    expect(ui.cspViolations).toEqual([])
  })
}
