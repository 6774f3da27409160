/** A stack's ACTION_STATUS as a badge: colour plus an icon, never colour alone. */
export function StatusBadge({ action, status }: { action: string; status: string }) {
  const icon = status === 'COMPLETE' ? '✓' : status === 'FAILED' ? '✗' : status === 'IN_PROGRESS' ? '⟳' : '•'
  return (
    <span className={`badge badge-${status.toLowerCase()}`} data-testid="stack-status">
      <span aria-hidden>{icon}</span> {action}_{status}
    </span>
  )
}

export function ProgressBar({ done, total, label }: { done: number; total: number; label?: string }) {
  const pct = total ? Math.round((done / total) * 100) : 0
  return (
    <span className="progress" role="progressbar" aria-valuemin={0} aria-valuemax={total} aria-valuenow={done} aria-label={label ?? 'progress'}>
      <span className="progress-fill" style={{ width: `${pct}%` }} />
      <span className="progress-text">{done}/{total}</span>
    </span>
  )
}
