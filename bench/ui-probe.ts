/**
 * What `npm run bench:ui` installs in the page before any of the page's own
 * scripts run (Playwright's addInitScript, through the DevTools protocol, so
 * a Content-Security-Policy does not apply to it). Everything is measured in
 * the page, on the page's clock, which is the machine's wall clock:
 *
 * - readyAt: the first frame in which every node is painted (the graph host's
 *   `data-painted`, set after the canvas drew them; for a page without it the
 *   `data-drawn` counts) and the resources table holds every row
 *   (`aria-rowcount`, else its DOM rows);
 * - shown: [last applied event seq, time] pairs the page pushes after the
 *   paint that put those events on screen (components/perf-probe.ts);
 * - received: [last event seq, time] pairs the page pushes as each batch
 *   arrives on its socket (what is left of the delay is the page's own);
 * - frame gaps between animation frames while `measuring`;
 * - agreement between the status badge, the progress bar and the graph,
 *   sampled every frame while `measuring`;
 * - the browser's own account of each frame over 100 ms while `measuring`
 *   (Long Animation Frames): how much of it was script, how much style,
 *   layout and paint, and how much neither (the page's thread waiting for
 *   the CPU, which the machine's other processes hold).
 *
 */
export interface ProbeState {
  expectNodes: number
  readyAt: number | null
  shown: [number, number][]
  received: [number, number][]
  measuring: boolean
  maxGap: number
  gapsOver100: number
  frames: number
  samples: number
  disagreements: number
  examples: string[]
  /** named moments of the page's load (ms after navigation start) */
  marks?: [string, number][]
  /** frames over 100 ms while measuring: [duration, script, style/layout/paint] ms and the scripts */
  longFrames: [number, number, number, string][]
}

/**
 * The probe as a page script. Plain JavaScript text, not a function handed to
 * Playwright: this file runs under tsx, whose transform wraps named functions
 * in a helper that does not exist in the page.
 */
export function probeScript(nodes: number): string {
  return `(${PROBE})(${JSON.stringify({ nodes })})`
}

const PROBE = `function (arg) {
  const p = { expectNodes: arg.nodes, readyAt: null, shown: [], received: [], measuring: false, maxGap: 0, gapsOver100: 0, frames: 0, samples: 0, disagreements: 0, examples: [], longFrames: [] }
  window.__kilnProbe = p
  try {
    new PerformanceObserver((list) => {
      if (!p.measuring) return
      for (const e of list.getEntries()) {
        if (e.duration <= 100) continue
        let script = 0
        const top = []
        for (const s of e.scripts || []) {
          script += s.duration
          top.push(Math.round(s.duration) + ' ' + (s.invoker || '?') + ' ' + (s.sourceFunctionName || ''))
        }
        const layout = e.styleAndLayoutStart ? e.startTime + e.duration - e.styleAndLayoutStart : 0
        p.longFrames.push([Math.round(e.duration), Math.round(script), Math.round(layout), top.join(' | ')])
      }
    }).observe({ type: 'long-animation-frame' })
  } catch (e) { /* a browser without Long Animation Frames */ }
  const ACTIVE = ['running', 'deleting', 'ready', 'waiting', 'retriggered', 'blocked']
  const DONE = ['complete', 'deleted', 'skipped', 'replaced', 'failed']
  function counts() {
    const raw = document.querySelector('[data-testid="graph"]')?.getAttribute('data-drawn')
    if (!raw) return null
    try { return JSON.parse(raw) } catch { return null }
  }
  function sum(c, keys) {
    let n = 0
    for (const k in c) if (!keys || keys.includes(k)) n += c[k]
    return n
  }
  function ready() {
    const g = document.querySelector('[data-testid="graph"]')
    const c = counts()
    const represented = Number(g?.getAttribute('data-represented') ?? 0)
    // data-painted: the nodes the canvas has painted (pages that say so); else what was handed to the graph.
    const painted = g?.getAttribute('data-painted')
    if (!c || (painted != null ? Number(painted) : Math.max(sum(c), represented)) < p.expectNodes) return false
    const table = document.querySelector('[role="table"][aria-label="resources"]')
    if (!table) return false
    const rowcount = table.getAttribute('aria-rowcount')
    const rows = rowcount !== null ? Number(rowcount) - 1 : table.querySelectorAll('[data-resource]').length
    return rows >= p.expectNodes
  }
  function agree() {
    const c = counts()
    const badge = document.querySelector('[data-testid="stack-status"]')?.textContent ?? ''
    if (!c || !badge) return
    p.samples++
    const problems = []
    const active = sum(c, ACTIVE)
    if (!/IN_PROGRESS/.test(badge) && active > 0) problems.push('badge "' + badge.trim() + '" while ' + active + ' nodes are active')
    if (/COMPLETE/.test(badge) && (c['not-started'] ?? 0) > 0) problems.push('badge "' + badge.trim() + '" while ' + c['not-started'] + ' nodes are not started')
    const bar = document.querySelector('[role="progressbar"][aria-label="traversal progress"]')
    if (bar) {
      const now = Number(bar.getAttribute('aria-valuenow'))
      const max = Number(bar.getAttribute('aria-valuemax'))
      const done = sum(c, DONE)
      if (now !== done || max !== sum(c)) problems.push('progress ' + now + '/' + max + ' while the graph shows ' + done + '/' + sum(c) + ' done')
    }
    if (problems.length) {
      p.disagreements++
      if (p.examples.length < 5) p.examples.push(problems.join('; '))
    }
  }
  let last = 0
  function tick(t) {
    if (p.readyAt === null && ready()) p.readyAt = Date.now()
    if (p.measuring) {
      p.frames++
      if (last) {
        const gap = t - last
        if (gap > p.maxGap) p.maxGap = gap
        if (gap > 100) p.gapsOver100++
      }
      agree()
    }
    last = t
    requestAnimationFrame(tick)
  }
  requestAnimationFrame(tick)
}`

/** p50/p95/max of a list of numbers (ms), rounded. */
export function percentiles(values: number[]): { n: number; p50: number; p95: number; max: number } {
  const s = [...values].sort((a, b) => a - b)
  const at = (q: number) => (s.length ? s[Math.min(s.length - 1, Math.floor(q * (s.length - 1)))]! : NaN)
  return { n: s.length, p50: Math.round(at(0.5)), p95: Math.round(at(0.95)), max: Math.round(s.at(-1) ?? NaN) }
}

/** For each event seq, the first time the page reported it on screen (its `shown` pairs, in order). */
export function shownTimes(shown: [number, number][], seqs: number[]): Map<number, number> {
  const out = new Map<number, number>()
  // shown seqs only grow; a refetch may report a jump covering many events at once.
  let best = 0
  const frontier: [number, number][] = []
  for (const [seq, at] of shown) {
    if (seq <= best) continue
    best = seq
    frontier.push([seq, at])
  }
  for (const s of seqs) {
    let lo = 0
    let hi = frontier.length
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (frontier[mid]![0] >= s) hi = mid
      else lo = mid + 1
    }
    if (lo < frontier.length) out.set(s, frontier[lo]![1])
  }
  return out
}
