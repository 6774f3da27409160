/**
 * Drift in a real Chromium: Check drift marks a file edited out of band on
 * the graph and the table, the node panel shows its diff (both themes, and
 * 390 px wide), Submit with converge brings it back, in sync at the next
 * check; Preempt is offered only while an update runs and aborts the action
 * held at a wait condition.
 */
import fs from 'node:fs'
import path from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { beforeAll, describe, expect, test } from 'vitest'
import { axeViolations } from '../helpers/axe'
import { browserSuite, SHOTS, testCleanPages, useUiSession } from '../helpers/ui-session'

describe.runIf(browserSuite)('UI in Chromium: drift and preempt', () => {
  const ui = useUiSession()
  const { c, web, a, shot, row, setTemplate, accessible, tabTo, focusedTestId, waitStatus } = ui
  let page: Page
  let browser: Browser
  beforeAll(() => {
    page = ui.page
    browser = ui.browser
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

  testCleanPages(ui)
})
