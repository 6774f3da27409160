/**
 * `npm run bench:ui -- --profile <dir>`: the page's CPU profile over a phase
 * (the DevTools protocol's sampling profiler), saved for DevTools and
 * summarised: where the main thread's time went, by function and script.
 */
import fs from 'node:fs'
import path from 'node:path'
import type { Page } from 'playwright-core'

interface CallFrame {
  functionName: string
  url: string
  lineNumber: number
  columnNumber: number
}
interface Profile {
  nodes: { id: number; callFrame: CallFrame }[]
  samples?: number[]
  timeDeltas?: number[]
}

/** Starts profiling the page; the returned function stops, saves `<dir>/<name>.cpuprofile` and returns a summary. */
export async function profilePage(page: Page, dir: string, name: string): Promise<() => Promise<string>> {
  const cdp = await page.context().newCDPSession(page)
  await cdp.send('Profiler.enable')
  await cdp.send('Profiler.setSamplingInterval', { interval: 500 })
  await cdp.send('Profiler.start')
  return async () => {
    const { profile } = (await cdp.send('Profiler.stop')) as unknown as { profile: Profile }
    await cdp.detach()
    fs.mkdirSync(dir, { recursive: true })
    fs.writeFileSync(path.join(dir, `${name}.cpuprofile`), JSON.stringify(profile))
    return summarise(profile, name)
  }
}

function summarise(p: Profile, name: string): string {
  const byNode = new Map(p.nodes.map((n) => [n.id, n.callFrame]))
  const self = new Map<string, number>()
  const byScript = new Map<string, number>()
  let total = 0
  ;(p.samples ?? []).forEach((id, i) => {
    const dt = (p.timeDeltas?.[i] ?? 0) / 1000
    const f = byNode.get(id)
    if (!f) return
    total += dt
    const script = f.url ? f.url.replace(/^.*\/_next\//, '').replace(/^https?:\/\/[^/]+/, '') : `(${f.functionName || 'native'})`
    const key = `${f.functionName || '(anonymous)'}  ${script}:${f.lineNumber + 1}:${f.columnNumber + 1}`
    self.set(key, (self.get(key) ?? 0) + dt)
    byScript.set(script, (byScript.get(script) ?? 0) + dt)
  })
  const top = (m: Map<string, number>, n: number) => [...m].sort((a, b) => b[1] - a[1]).slice(0, n).map(([k, v]) => `    ${v.toFixed(0).padStart(7)} ms  ${k}`)
  return [`  profile ${name}: ${total.toFixed(0)} ms sampled`, '  by script:', ...top(byScript, 8), '  by function (self time):', ...top(self, 25)].join('\n')
}
