/**
 * The providers page in a real Chromium: a provider registered from the
 * form (its generated secret shown once), its types listed and offered in
 * the editor, refreshed, removed after a confirmation; the page clean under
 * axe and without horizontal scroll at 390 px.
 */
import type { Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { browserSuite, useUiSession } from '../helpers/ui-session'
import { startTestProvider, type TestProvider } from '../helpers/test-provider'
import { axeViolations } from '../helpers/axe'

describe.runIf(browserSuite)('UI in Chromium: providers', () => {
  const ui = useUiSession()
  const { accessible, shot, setTemplate } = ui
  let page: Page
  let p: TestProvider
  beforeAll(async () => {
    page = ui.page
  })
  afterAll(async () => {
    await p?.stop()
  })

  test('register a provider from the form, see its types, use them in the editor, remove it', async () => {
    await page.goto('/providers')
    await page.getByTestId('no-providers').waitFor()
    await accessible('the providers page, empty')
    // The test provider checks Kiln's signatures with the secret the form gives.
    await page.getByLabel('provider name').fill('acme')
    await page.getByLabel('type prefix').fill('Acme')
    p = await startTestProvider({ secret: 'not-yet-known-0123456789' })
    await page.getByLabel('provider URL').fill(p.url)
    await page.getByLabel('provider secret').fill('not-yet-known-0123456789')
    await page.getByRole('button', { name: 'Register' }).click()
    await page.getByTestId('providers-table').waitFor()
    const row = page.locator('tr[data-provider="acme"]')
    expect(await row.innerText()).toMatch(/Acme::Bucket[\s\S]*Acme::Slow/)
    await shot('15-providers')
    await accessible('the providers page with a provider')

    // Its types are offered in the editor.
    await page.goto('/stacks/new')
    await setTemplate('heat_template_version: 2018-08-31\nresources:\n  b:\n    type: Acme::')
    await page.keyboard.type('Bu')
    await page.locator('.cm-tooltip-autocomplete').waitFor()
    expect(await page.locator('.cm-tooltip-autocomplete').innerText()).toContain('Acme::Bucket')

    await page.goto('/providers')
    await page.getByRole('button', { name: 'refresh the types of acme' }).click()
    await page.getByRole('button', { name: 'remove acme…' }).click()
    await page.getByRole('button', { name: 'Remove the provider' }).click()
    await page.getByTestId('no-providers').waitFor()
  })

  test('a provider that cannot be reached is refused with the reason, and the page keeps the form', async () => {
    await page.goto('/providers')
    await page.getByLabel('provider name').fill('gone')
    await page.getByLabel('type prefix').fill('Gone')
    await page.getByLabel('provider URL').fill('http://127.0.0.1:9')
    await page.getByRole('button', { name: 'Register' }).click()
    await expect.poll(() => page.getByTestId('providers-error').innerText(), { timeout: 20_000 }).toMatch(/url: could not read the provider's types/)
    expect(await page.getByLabel('provider URL').inputValue()).toBe('http://127.0.0.1:9')
  })

  test('390 px wide: no horizontal page scroll', async () => {
    await page.setViewportSize({ width: 390, height: 844 })
    await page.goto('/providers')
    await page.locator('h1').waitFor()
    expect(await page.evaluate(() => Math.max(document.documentElement.scrollWidth, document.body.scrollWidth))).toBe(390)
    expect(await axeViolations(page)).toEqual([])
    await page.setViewportSize({ width: 1280, height: 900 })
  })
})
