/**
 * axe-core in the browser tests: its script is evaluated in the page (through
 * the DevTools protocol, so the page's Content-Security-Policy does not stop
 * it) and run on the whole document. Returns each violation with the
 * elements it names, for a failure message that says where.
 */
import axe from 'axe-core'
import type { Page } from 'playwright-core'

export interface AxeViolation {
  id: string
  impact: string | null
  help: string
  targets: string[]
}

export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(axe.source)
  return page.evaluate(async () => {
    const a = (window as unknown as { axe: typeof axe }).axe
    const r = await a.run(document, { resultTypes: ['violations'] })
    return r.violations.map((v) => ({ id: v.id, impact: v.impact ?? null, help: v.help, targets: v.nodes.slice(0, 6).map((n) => n.target.join(' ')) }))
  })
}
