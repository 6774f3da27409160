import type { EventRow } from '../lib/ui/graph-model'

const describe = (e: EventRow) => {
  const st = typeof e.data?.state === 'string' ? String(e.data.state) : e.action && e.status ? `${e.action}_${e.status}` : ''
  return st
}

/** The stack's latest events, newest first. */
export function EventsTimeline({ events }: { events: EventRow[] }) {
  const shown = events.slice(-200).reverse()
  return (
    <ol className="timeline" aria-label="events" data-testid="events">
      {shown.map((e) => (
        <li key={e.seq} className={`ev ev-${e.kind}`}>
          <span className="seq">#{e.seq}</span> <time>{new Date(e.at).toLocaleTimeString()}</time>{' '}
          <strong>{e.resourceName ?? (e.kind === 'stack' || e.kind === 'traversal' ? 'stack' : '')}</strong> {describe(e)} <small>{e.reason}</small>
        </li>
      ))}
    </ol>
  )
}
