import { describeEvent, type WorkerNames } from '../lib/ui/event-text'
import type { EventRow } from '../lib/ui/graph-model'

/** The shown traversal's latest events, newest first, in plain words. */
export function EventsTimeline({ events, workers }: { events: EventRow[]; workers: WorkerNames }) {
  const shown = events.slice(-200).reverse()
  return (
    <ol className="timeline" aria-label="events" data-testid="events" tabIndex={0}>
      {shown.map((e) => (
        <li key={e.seq} className={`ev ev-${e.kind}`}>
          <span className="seq">#{e.seq}</span> <time dateTime={e.at}>{new Date(e.at).toLocaleTimeString()}</time>{' '}
          <strong>{e.resourceName ?? (e.kind === 'stack' || e.kind === 'traversal' ? 'stack' : '')}</strong> {describeEvent(e, workers)}
        </li>
      ))}
      {shown.length === 0 && <li className="empty">No events yet.</li>}
    </ol>
  )
}
