/**
 * Benchmark templates of OS::Heat::TestResource in three shapes:
 *   chain    r[i] needs r[i-1]
 *   wide     independent resources
 *   layered  10 layers (or `layers`); each node needs two nodes of the layer before
 */
export type Shape = 'chain' | 'wide' | 'layered'

export interface Phase {
  /** property values for every resource in this phase */
  value: string
  replace: boolean
}

export function benchTemplate(shape: Shape, n: number, delaySecs: number, phase: Phase, layers = 10): string {
  const resources: Record<string, unknown> = {}
  const perLayer = Math.max(1, Math.ceil(n / layers))
  for (let i = 0; i < n; i++) {
    let deps: string[] = []
    if (shape === 'chain' && i > 0) deps = [`r${i - 1}`]
    if (shape === 'layered') {
      const layer = Math.floor(i / perLayer)
      if (layer > 0) {
        const pos = i % perLayer
        const prevStart = (layer - 1) * perLayer
        deps = [...new Set([prevStart + (pos % perLayer), prevStart + ((pos + 1) % perLayer)])].map((j) => `r${j}`)
      }
    }
    const props: Record<string, unknown> = { value: `${phase.value}-${i}` }
    if (delaySecs > 0) props.wait_secs = delaySecs
    // update_replace makes a change of `value` a replacement (Heat's TestResource semantics).
    if (phase.replace) props.update_replace = true
    resources[`r${i}`] = deps.length ? { type: 'OS::Heat::TestResource', properties: props, depends_on: deps } : { type: 'OS::Heat::TestResource', properties: props }
  }
  return JSON.stringify({ heat_template_version: '2018-08-31', resources })
}

/** Length (in nodes) of the longest dependency chain. */
export function criticalPathNodes(shape: Shape, n: number): number {
  if (shape === 'chain') return n
  if (shape === 'wide') return 1
  return Math.min(10, n)
}
