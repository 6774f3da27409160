/**
 * Readable for everyone, in a real Chromium: the dark theme (the toggle
 * switches it; axe-core finds nothing on the stack page and the stacks list),
 * and pages 390 px wide with no horizontal scroll, the node drawer included.
 * axe-core also runs on the pages of the other browser suites.
 */
import path from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { beforeAll, describe, expect, test } from 'vitest'
import { axeViolations } from '../helpers/axe'
import { browserSuite, plainChain, SHOTS, testCleanPages, useUiSession } from '../helpers/ui-session'

describe.runIf(browserSuite)('UI in Chromium: themes and small screens', () => {
  const ui = useUiSession()
  const { c, web, a, shot, accessible } = ui
  let page: Page
  let browser: Browser
  let stackId = ''
  beforeAll(() => {
    page = ui.page
    browser = ui.browser
  })

  beforeAll(async () => {
    stackId = await ui.createStack('web-chain', plainChain('v1'))
    expect(await c.settle(stackId)).toBe('CREATE_COMPLETE')
  })

  test('the dark theme: the toggle switches it, every page stays readable (axe-core)', async () => {
    await page.goto(`/stacks/${stackId}`)
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

  testCleanPages(ui)
})
