/**
 * Large stacks in a real Chromium: a 1,000-resource traversal rendered in
 * full and followed live (the page's own canvas paints the states of nodes
 * too small to read; every state's pixels checked), and a 10,000-resource one
 * in the grouped view. The 1,000-node figures go to
 * test-results/ui/render-1000.json.
 */
import fs from 'node:fs'
import path from 'node:path'
import type { Page } from 'playwright-core'
import { beforeAll, describe, expect, test } from 'vitest'
import { benchTemplate } from '../../bench/shapes'
import { LOOKS } from '../../components/graph-style'
import type { NodeState } from '../../lib/ui/graph-model'
import { browserSuite, SHOTS, testCleanPages, useUiSession } from '../helpers/ui-session'

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

describe.runIf(browserSuite)('UI in Chromium: large stacks', () => {
  const ui = useUiSession()
  const { web, a, shot, drawn, waitStatus } = ui
  let page: Page
  beforeAll(() => {
    page = ui.page
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
  })

  testCleanPages(ui)
})
