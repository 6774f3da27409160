/**
 * Every elementary cycle of a dependency graph (Tarjan's strongly connected
 * components, then Johnson's algorithm inside each), in a deterministic
 * order: each cycle starts at its smallest name, cycles sorted. Capped, since
 * a dense component can have exponentially many.
 */
import type { Budget } from './budget'

export function findCycles(nodes: string[], edges: Map<string, string[]>, cap = 100, budget?: Budget): { cycles: string[][]; truncated: boolean } {
  const cycles: string[][] = []
  let truncated = false
  for (const scc of stronglyConnected(nodes, edges, budget)) {
    const members = new Set(scc)
    if (scc.length === 1) {
      const n = scc[0]!
      if ((edges.get(n) ?? []).includes(n)) cycles.push([n])
      continue
    }
    // Johnson: for each start node s (in order), find circuits through s using only nodes >= s.
    // Iterative (a cycle through thousands of resources must not overflow the stack), and each
    // node's successors inside the component are sorted once, not on every visit.
    const order = [...scc].sort()
    const rank = new Map(order.map((n, i) => [n, i]))
    const succ = new Map(order.map((n) => [n, (edges.get(n) ?? []).filter((x) => members.has(x)).sort()]))
    // The latest-ranked predecessor of each node: a start none of whose predecessors is still
    // allowed lies on no remaining circuit (a ring of n resources costs n steps, not n squared).
    const lastPred = new Map<string, number>()
    for (const [v, ws] of succ) for (const w of ws) lastPred.set(w, Math.max(lastPred.get(w) ?? -1, rank.get(v)!))
    for (let si = 0; si < order.length && !truncated; si++) {
      const start = order[si]!
      if ((lastPred.get(start) ?? -1) < si) continue
      const allowed = (x: string) => rank.get(x)! >= si
      const blocked = new Set<string>()
      const blockMap = new Map<string, Set<string>>()
      const stack: string[] = []
      const unblock = (u: string) => {
        const todo = [u]
        while (todo.length) {
          const x = todo.pop()!
          blocked.delete(x)
          for (const w of blockMap.get(x) ?? []) if (blocked.has(w)) todo.push(w)
          blockMap.delete(x)
        }
      }
      const frames: { v: string; next: string[]; i: number; found: boolean }[] = []
      const enter = (v: string) => {
        stack.push(v)
        blocked.add(v)
        frames.push({ v, next: succ.get(v)!.filter(allowed), i: 0, found: false })
      }
      enter(start)
      while (frames.length && !truncated) {
        const f = frames[frames.length - 1]!
        if (f.i < f.next.length) {
          budget?.op()
          const w = f.next[f.i++]!
          if (w === start) {
            cycles.push([...stack])
            if (cycles.length >= cap) truncated = true
            f.found = true
          } else if (!blocked.has(w)) enter(w)
          continue
        }
        if (f.found) unblock(f.v)
        else for (const w of f.next) (blockMap.get(w) ?? blockMap.set(w, new Set()).get(w)!).add(f.v)
        stack.pop()
        frames.pop()
        if (f.found && frames.length) frames[frames.length - 1]!.found = true
      }
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
function stronglyConnected(nodes: string[], edges: Map<string, string[]>, budget?: Budget): string[][] {
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
      budget?.op()
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
