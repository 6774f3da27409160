'use client'
/**
 * "3 rows blocked by traversal 3f2a… (started by admin at 12:01:02)": the
 * rows of this traversal waiting for an older one to let go, by the traversal
 * holding them, each a button that inspects it. They are retriggered when
 * their older worker finishes.
 */
import Link from 'next/link'
import { shortId } from '../lib/ui/event-text'
import type { DisplayNode } from '../lib/ui/graph-model'
import type { TraversalRow } from './stack-api'

export function SupersedeBanner({ stackId, blocked, traversals, onInspect }: { stackId: string; blocked: DisplayNode[]; traversals: TraversalRow[]; onInspect: (id: string, opener: HTMLElement) => void }) {
  if (!blocked.length) return null
  const byHolder = new Map<string, DisplayNode[]>()
  for (const n of blocked) {
    const k = n.blockedBy ?? ''
    byHolder.set(k, [...(byHolder.get(k) ?? []), n])
  }
  return (
    <section className="banner banner-blocked" aria-label="rows blocked by an older traversal" data-testid="supersede-banner">
      {[...byHolder].map(([tid, nodes]) => {
        const t = traversals.find((x) => x.id === tid)
        return (
          <div key={tid || 'unknown'}>
            <p>
              <strong>{nodes.length} row{nodes.length === 1 ? '' : 's'} blocked</strong> by{' '}
              {tid ? <Link href={`/stacks/${stackId}/traversals/${tid}`}>traversal <code>{shortId(tid)}</code></Link> : 'an older traversal'}
              {t ? ` (${t.action.toLowerCase()} started by ${t.startedBy} at ${new Date(t.startedAt).toLocaleTimeString()})` : ''}: each is handed over when that traversal&apos;s worker lets go.
            </p>
            <ul className="inline-list">
              {nodes.slice(0, 50).map((n) => (
                <li key={n.id}><button type="button" className="link" onClick={(e) => onInspect(n.id, e.currentTarget)}>{n.name}</button></li>
              ))}
              {nodes.length > 50 && <li>and {nodes.length - 50} more (filter “blocked” to see them all)</li>}
            </ul>
          </div>
        )
      })}
    </section>
  )
}
