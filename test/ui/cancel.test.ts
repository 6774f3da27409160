/**
 * Cancelling, rolling back and deleting from the stack page in a real
 * Chromium: cancel with rollback, then cancel without (keyboard only: submit,
 * cancel, inspect; the graph kept after the cancel); a check and a rollback
 * from the buttons; a delete with confirmation.
 */
import type { Page } from 'playwright-core'
import { beforeAll, describe, expect, test } from 'vitest'
import { browserSuite, chain, plainChain, useUiSession } from '../helpers/ui-session'

describe.runIf(browserSuite)('UI in Chromium: cancel, rollback, delete', () => {
  const ui = useUiSession()
  const { c, consoleErrors, cspViolations, shot, row, setTemplate, accessible, tabTo, focusedTestId, focusedName, drawn, waitStatus } = ui
  let page: Page
  let stackId = ''
  beforeAll(() => {
    page = ui.page
  })

  // The stack the updates are cancelled on: network waits at its gate until signalled; its timeout is the
  // updates' own, so they change network in place.
  beforeAll(async () => {
    stackId = await ui.createChain('web-chain', { value: 'v1', timeout: 1800 })
  })

  /** One more SUCCESS signal to network's gate (the web-chain stack's); `value` goes into network's `data`. */
  const releaseGate = (value: string) => ui.releaseGate(stackId, value)

  test('cancel with rollback, then cancel without rollback', async () => {
    await page.goto(`/stacks/${stackId}`)
    // network's update waits at the gate for one more signal
    await setTemplate(chain({ value: 'v5', count: ui.signals(stackId) + 1, timeout: 1800 }))
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

    // Keyboard only from here: submit, cancel, inspect. network's update waits at the gate (one more signal)
    // for as long as the keyboard takes to get to Cancel; the test signals only after the cancel.
    await setTemplate(chain({ value: 'v6', count: ui.signals(stackId) + 1, timeout: 1800 }))
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
    // every traversal of the stack: the create, the update cancelled with rollback, the rollback, the one cancelled without
    const traversals = (await c.db.pool.query('SELECT count(*)::int AS n FROM traversal WHERE stack_id = $1', [stackId])).rows[0].n as number
    expect(traversals).toBe(4)
    await expect.poll(() => page.getByTestId('traversals').locator('tbody tr').count()).toBe(traversals)
    await shot('08-cancelled')
  })

  test('check, then roll back, from the buttons', async () => {
    await page.getByRole('button', { name: 'Check', exact: true }).click()
    await waitStatus('CHECK_COMPLETE', 30_000)
    await page.getByRole('button', { name: 'Rollback' }).click()
    await waitStatus('ROLLBACK_COMPLETE', 45_000)
  })

  test('a node waiting at a hook says so in its panel, and Continue lets the create go on', async () => {
    const res = await fetch(`${ui.web.url}/api/stacks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-auth-token': ui.a.token },
      body: JSON.stringify({ name: 'hooked', template: plainChain('h1'), environment: { resource_registry: { resources: { subnet: { hooks: 'pre-create' } } } } }),
    })
    expect(res.status).toBe(201)
    const id = ((await res.json()) as { stack: { id: string } }).stack.id
    await page.goto(`/stacks/${id}?node=subnet`)
    // The hook holds subnet for as long as the test takes: only the button below lets it go.
    await page.getByTestId('node-hook').waitFor({ timeout: 60_000 })
    expect(await page.getByTestId('node-hook').innerText()).toMatch(/pre-create hook on subnet/)
    expect(await page.getByTestId('node-state').innerText()).toBe('paused at the pre-create hook')
    await accessible('node waiting at a hook')
    await shot('09-hook-gate')
    await page.getByRole('button', { name: 'Continue (clear the pre-create hook)' }).click()
    await waitStatus('CREATE_COMPLETE', 60_000)
    await expect.poll(() => page.getByTestId('node-hook').count()).toBe(0)
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
