/** Terminal output for the CLI: tables, the progress bar, durations. */
import { terminalSafe } from './terminal-safe'

export function table(rows: Record<string, unknown>[], columns: string[]): string {
  if (!rows.length) return '(none)'
  // Sanitized before the widths are measured; one line per row: a newline or tab inside a value (a multi-line reason) would break the columns.
  const cell = (v: unknown) => terminalSafe(v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v)).replace(/[\n\t]/g, ' ')
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)))
  const line = (vals: string[]) => vals.map((v, i) => v.padEnd(widths[i]!)).join('  ').trimEnd()
  return [line(columns.map((c) => c.toUpperCase())), line(widths.map((w) => '-'.repeat(w))), ...rows.map((r) => line(columns.map((c) => cell(r[c]))))].join('\n')
}

export function duration(ms: number): string {
  const s = Math.round(ms / 1000)
  if (s < 60) return `${s}s`
  const m = Math.floor(s / 60)
  return m < 60 ? `${m}m${String(s % 60).padStart(2, '0')}s` : `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`
}

export interface Progress {
  total: number
  done: number
  running: number
  blocked: number
  failed: number
}

/** `[#######.......]  7/20 nodes  2 running  1 blocked  0 failed  12s  ~18s left` */
export function progressLine(label: string, p: Progress, elapsedMs: number, width = 28): string {
  const frac = p.total ? Math.min(1, p.done / p.total) : 0
  const filled = Math.round(frac * width)
  const rate = p.done > 0 ? elapsedMs / p.done : null
  const left = rate && p.total > p.done ? `  ~${duration(rate * (p.total - p.done))} left` : ''
  return `${label} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${p.done}/${p.total} nodes  ${p.running} running  ${p.blocked} blocked  ${p.failed} failed  ${duration(elapsedMs)}${left}`
}
