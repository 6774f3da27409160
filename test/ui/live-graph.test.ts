/**
 * The live graph in a real Chromium, against real worker processes: a stack
 * created from the editor and watched running -> complete, then replayed by
 * time; an update submitted while one runs supersedes it (a node shown
 * blocked with the supersede banner, then retriggered); the superseded
 * traversal opened by deep link; the first load's reads started by the
 * page's HTML; a traversal that ends while the page loads shown ended.
 */
import type { BrowserContext, Page } from 'playwright-core'
import { beforeAll, describe, expect, test } from 'vitest'
import { firstLoadPaths } from '../../components/stack-api'
import { browserSuite, chain, testCleanPages, useUiSession } from '../helpers/ui-session'

describe.runIf(browserSuite)('UI in Chromium: live graph', () => {
  const ui = useUiSession()
  const { c, web, a, cspViolations, shot, row, status, setTemplate, accessible, drawn, waitStatus } = ui
  let page: Page
  let ctx: BrowserContext
  let stackId = ''
  beforeAll(() => {
    page = ui.page
    ctx = ui.ctx
  })

  /** One more SUCCESS signal to network's gate (the web-chain stack's); `value` goes into network's `data`. */
  const releaseGate = (value: string) => ui.releaseGate(stackId, value)

  test('create a stack from the editor and watch its nodes go running -> complete', async () => {
    await page.goto('/stacks/new')
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

  testCleanPages(ui)
})
