'use client'
/**
 * Replay a traversal by time: a slider over its duration, play and pause, a
 * speed. While replaying, the graph, the table and the header show the
 * traversal as it was at that moment; "Back to live" returns to now.
 */
import { useEffect, useRef } from 'react'

export const SPEEDS = [1, 2, 5, 10, 30] as const
/** Playback clock: how often the position moves while playing. */
const TICK_MS = 100

export function ReplayBar(p: {
  /** seconds from the traversal's first to its last event */
  duration: number
  /** seconds from the start; null: live */
  at: number | null
  playing: boolean
  speed: number
  onSeek: (at: number | null) => void
  onPlay: (playing: boolean) => void
  onSpeed: (speed: number) => void
  /** a past traversal: there is no "live", only its end */
  finished: boolean
}) {
  const state = useRef(p)
  state.current = p

  useEffect(() => {
    if (!p.playing) return
    // Timer reason: the playback clock (each tick moves the position by TICK_MS x speed).
    const t = setInterval(() => {
      const s = state.current
      const next = (s.at ?? 0) + (TICK_MS / 1000) * s.speed
      if (next >= s.duration) {
        s.onPlay(false)
        s.onSeek(s.finished ? s.duration : null)
      } else s.onSeek(next)
    }, TICK_MS)
    return () => clearInterval(t)
  }, [p.playing])

  const at = p.at ?? p.duration
  return (
    <div className="replay" data-testid="replay" role="group" aria-label="replay">
      <button
        type="button"
        className="icon"
        aria-label={p.playing ? 'pause the replay' : 'play the replay'}
        onClick={() => {
          if (!p.playing && (p.at === null || p.at >= p.duration)) p.onSeek(0)
          p.onPlay(!p.playing)
        }}
      >
        {p.playing ? '❚❚' : '▶'}
      </button>
      <input
        type="range"
        min={0}
        max={Math.max(p.duration, 0.1)}
        step={0.1}
        value={at}
        aria-label="replay position"
        aria-valuetext={`${at.toFixed(1)} s of ${p.duration.toFixed(1)} s`}
        onChange={(e) => {
          const v = Number(e.target.value)
          p.onSeek(v >= p.duration && !p.finished ? null : v)
        }}
      />
      <span className="replay-time" data-testid="replay-time">{p.at === null ? (p.finished ? `${p.duration.toFixed(1)} s (end)` : 'live') : `+${p.at.toFixed(1)} s of ${p.duration.toFixed(1)} s`}</span>
      <label className="speed">
        <span className="sr-only">replay speed</span>
        <select value={p.speed} onChange={(e) => p.onSpeed(Number(e.target.value))} aria-label="replay speed">
          {SPEEDS.map((s) => <option key={s} value={s}>{s}×</option>)}
        </select>
      </label>
      {p.at !== null && (
        <button type="button" onClick={() => { p.onPlay(false); p.onSeek(null) }}>{p.finished ? 'Show the end' : 'Back to live'}</button>
      )}
    </div>
  )
}
