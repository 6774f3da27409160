'use client'
/** Scrub through a traversal's events; the graph and table show the state as of the chosen event. */
import type { EventRow } from '../lib/ui/graph-model'

export function ReplayBar({ events, at, onChange }: { events: EventRow[]; at: number | null; onChange: (seq: number | null) => void }) {
  if (events.length === 0) return null
  const first = events[0]!
  const idx = at === null ? events.length - 1 : Math.max(0, events.findIndex((e) => e.seq >= at))
  const cur = events[idx]!
  const t = (Date.parse(cur.at) - Date.parse(first.at)) / 1000
  return (
    <div className="replay" data-testid="replay">
      <label>
        Replay{' '}
        <input
          type="range"
          min={0}
          max={events.length - 1}
          value={idx}
          aria-label="replay position"
          aria-valuetext={`event ${idx + 1} of ${events.length}, ${t.toFixed(1)} s`}
          onChange={(e) => {
            const i = Number(e.target.value)
            onChange(i >= events.length - 1 ? null : events[i]!.seq)
          }}
        />
      </label>
      <span>{at === null ? 'live' : `+${t.toFixed(1)} s · event ${idx + 1}/${events.length}`}</span>
      {at !== null && <button type="button" onClick={() => onChange(null)}>Back to live</button>}
    </div>
  )
}
