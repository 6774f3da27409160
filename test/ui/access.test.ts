/**
 * Signing in, and what no one else may see, in a real Chromium: every page is
 * served under a nonce-based Content-Security-Policy with the framing and
 * sniffing headers; the login form (a wrong token, then the right one); a
 * second project can neither open a stack page nor join its socket room; a
 * sensitive output stays masked until Reveal asks for it. The suite starts
 * signed out.
 */
import type { Page } from 'playwright-core'
import { io as connect } from 'socket.io-client'
import { beforeAll, describe, expect, test } from 'vitest'
import { browserSuite, plainChain, testCleanPages, useUiSession } from '../helpers/ui-session'

describe.runIf(browserSuite)('UI in Chromium: access', () => {
  const ui = useUiSession({ signedIn: false })
  const { c, web, a, b, cspViolations, newContext, shot, accessible, waitStatus } = ui
  let page: Page
  let stackId = ''
  beforeAll(() => {
    page = ui.page
  })

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

  test('a second project cannot open the stack page or join its socket room', async () => {
    // project A's stack, made now: the list was empty when A signed in
    stackId = await ui.createStack('web-chain', plainChain('v1'))
    expect(await c.settle(stackId)).toBe('CREATE_COMPLETE')
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

  testCleanPages(ui)
})
