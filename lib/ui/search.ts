/**
 * Search and filters over the graph's nodes. A query is words that must all
 * match: `state:failed`, `type:testresource`, `drift:modified` (or
 * `drift:deleted`, `drift:in-sync`), or plain text found in the name, type or
 * state. Filters (any of them) narrow further. Pure.
 */
import { isDrifted } from './drift'
import { NODE_STATES, type DisplayNode, type GraphModel } from './graph-model'

export type Filter = 'blocked' | 'failed' | 'running' | 'replaced' | 'drifted'

const FILTER: Record<Filter, (n: DisplayNode) => boolean> = {
  blocked: (n) => n.state === 'blocked' || n.wasBlocked,
  failed: (n) => n.state === 'failed',
  running: (n) => n.state === 'running' || n.state === 'deleting',
  replaced: (n) => n.state === 'replaced' || n.replaces !== null || n.replacedBy !== null,
  drifted: (n) => isDrifted(n.drift),
}

const stateWords = (n: DisplayNode) => `${n.state} ${NODE_STATES.find((s) => s.state === n.state)?.label ?? ''}`

function matches(n: DisplayNode, word: string): boolean {
  const [field, value] = word.includes(':') ? [word.slice(0, word.indexOf(':')), word.slice(word.indexOf(':') + 1)] : [null, word]
  if (field === 'state') return stateWords(n).includes(value)
  if (field === 'type') return n.type.toLowerCase().includes(value)
  if (field === 'name') return n.name.toLowerCase().includes(value)
  if (field === 'drift') return (n.drift?.state ?? 'unchecked').toLowerCase().replace('_', '-').includes(value)
  return n.name.toLowerCase().includes(word) || n.type.toLowerCase().includes(word) || stateWords(n).includes(word)
}

/** The ids of the nodes a query and filters select; null when neither is given (nothing is singled out). */
export function selectNodes(m: GraphModel, query: string, filters: ReadonlySet<Filter>): Set<string> | null {
  const words = query.trim().toLowerCase().split(/\s+/).filter(Boolean)
  if (!words.length && !filters.size) return null
  const out = new Set<string>()
  for (const n of m.nodes.values()) {
    if (filters.size && ![...filters].some((f) => FILTER[f](n))) continue
    if (words.every((w) => matches(n, w))) out.add(n.id)
  }
  return out
}
