/**
 * The template editor in a real Chromium: a template error shown at its line
 * and column (nothing created); type names completed after `type:`; a preview of an update that replaces a
 * resource, the update submitted and the replacement followed on the graph;
 * two sessions editing the same stack (the second told the template changed,
 * its Submit refused with the conflict view, then rebased and submitted).
 */
import path from 'node:path'
import type { BrowserContext, Page } from 'playwright-core'
import { beforeAll, describe, expect, test } from 'vitest'
import { browserSuite, chain, plainChain, SHOTS, testCleanPages, useUiSession } from '../helpers/ui-session'

describe.runIf(browserSuite)('UI in Chromium: editor and review', () => {
  const ui = useUiSession()
  const { c, web, a, consoleErrors, newContext, shot, row, setTemplate, accessible, waitStatus } = ui
  let page: Page
  let stackId = ''
  beforeAll(() => {
    page = ui.page
  })

  // The stack the preview replaces a resource of: network waits at its gate until signalled.
  beforeAll(async () => {
    stackId = await ui.createChain('web-chain', { value: 'v1' })
  })

  /** One more SUCCESS signal to network's gate (the web-chain stack's); `value` goes into network's `data`. */
  const releaseGate = (value: string) => ui.releaseGate(stackId, value)

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

  test('after `type:` the editor offers the resource types the project may use, filtered by what is typed', async () => {
    await page.goto('/stacks/new')
    await setTemplate('heat_template_version: 2018-08-31\nresources:\n  conf:\n    type: Kiln::')
    // Typing opens the completion list, as a user typing the name would.
    await page.keyboard.type('Fi')
    const list = page.locator('.cm-tooltip-autocomplete')
    await list.waitFor({ timeout: 10_000 })
    expect(await list.innerText()).toContain('Kiln::File')
    expect(await list.innerText()).not.toContain('OS::Heat::TestResource')
    await accessible('the editor offering type names')
    await page.keyboard.press('Enter')
    await expect.poll(() => page.locator('[data-testid="template-editor"] .cm-content').innerText()).toContain('type: Kiln::File')
  })

  test('preview an update that replaces a resource, submit it, and see the replacement on the graph', async () => {
    await page.goto(`/stacks/${stackId}`)
    // A new timeout replaces network; the replacement's create waits at the gate for one more signal,
    // so the old row stays "replaced" (its dependents have not moved yet) until the test signals.
    await setTemplate(chain({ value: 'v4', count: ui.signals(stackId) + 1, timeout: 1800 }))
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

  testCleanPages(ui)
})
