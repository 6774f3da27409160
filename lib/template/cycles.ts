/**
 * Every elementary cycle of a dependency graph (Tarjan's strongly connected
 * components, then Johnson's algorithm inside each), in a deterministic
 * order: each cycle starts at its smallest name, cycles sorted. Capped, since
 * a dense component can have exponentially many.
 */

export function findCycles(nodes: string[], edges: Map<string, string[]>, cap = 100): { cycles: string[][]; truncated: boolean } {
  const cycles: string[][] = []
  let truncated = false
  for (const scc of stronglyConnected(nodes, edges)) {
    const members = new Set(scc)
    if (scc.length === 1) {
      const n = scc[0]!
      if ((edges.get(n) ?? []).includes(n)) cycles.push([n])
      continue
    }
    // Johnson: for each start node s (in order), find circuits through s using only nodes >= s.
    const order = [...scc].sort()
    for (let si = 0; si < order.length && !truncated; si++) {
      const start = order[si]!
      const allowed = new Set(order.slice(si))
      const blocked = new Set<string>()
      const blockMap = new Map<string, Set<string>>()
      const stack: string[] = []
      const unblock = (u: string) => {
        blocked.delete(u)
        for (const w of blockMap.get(u) ?? []) if (blocked.has(w)) unblock(w)
        blockMap.delete(u)
      }
      const circuit = (v: string): boolean => {
        if (truncated) return false
        let found = false
        stack.push(v)
        blocked.add(v)
        for (const w of (edges.get(v) ?? []).filter((x) => members.has(x) && allowed.has(x)).sort()) {
          if (w === start) {
            cycles.push([...stack])
            if (cycles.length >= cap) truncated = true
            found = true
          } else if (!blocked.has(w) && circuit(w)) found = true
          if (truncated) break
        }
        if (found) unblock(v)
        else for (const w of edges.get(v) ?? []) if (members.has(w) && allowed.has(w)) (blockMap.get(w) ?? blockMap.set(w, new Set()).get(w)!).add(v)
        stack.pop()
        return found
      }
      circuit(start)
    }
  }
  for (const c of cycles) {
    const i = c.indexOf([...c].sort()[0]!)
    c.push(...c.splice(0, i))
  }
  cycles.sort((a, b) => a.join('\u0000').localeCompare(b.join('\u0000')))
  return { cycles, truncated }
}

/** Tarjan's algorithm, iterative (templates may have tens of thousands of resources). */
function stronglyConnected(nodes: string[], edges: Map<string, string[]>): string[][] {
  let counter = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const onStack = new Set<string>()
  const stack: string[] = []
  const out: string[][] = []
  for (const root of nodes) {
    if (index.has(root)) continue
    const work: [string, number][] = [[root, 0]]
    index.set(root, counter)
    low.set(root, counter++)
    stack.push(root)
    onStack.add(root)
    while (work.length) {
      const frame = work[work.length - 1]!
      const [v, i] = frame
      const succ = edges.get(v) ?? []
      if (i < succ.length) {
        frame[1]++
        const w = succ[i]!
        if (!index.has(w)) {
          index.set(w, counter)
          low.set(w, counter++)
          stack.push(w)
          onStack.add(w)
          work.push([w, 0])
        } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
        continue
      }
      work.pop()
      if (work.length) {
        const parent = work[work.length - 1]![0]
        low.set(parent, Math.min(low.get(parent)!, low.get(v)!))
      }
      if (low.get(v) === index.get(v)) {
        const comp: string[] = []
        for (;;) {
          const w = stack.pop()!
          onStack.delete(w)
          comp.push(w)
          if (w === v) break
        }
        out.push(comp)
      }
    }
  }
  return out
}
