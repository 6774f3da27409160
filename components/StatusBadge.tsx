/**
 * A stack's (or a past traversal's) ACTION_STATUS as a badge: colour plus an
 * icon, never colour alone. A cancelled operation (FAILED in the API, because
 * a user stopped it) reads as cancelled, and a superseded traversal as
 * superseded, in neutral grey, not as a red failure.
 */
export function StatusBadge({ action, status, cancelled = false }: { action: string; status: string; cancelled?: boolean }) {
  if (cancelled || status === 'CANCELLED' || status === 'SUPERSEDED') {
    const what = status === 'SUPERSEDED' ? 'SUPERSEDED' : 'CANCELLED'
    return (
      <span className="badge badge-cancelled" data-testid="stack-status" title={what === 'CANCELLED' ? `${action}_${status}: cancelled by a user` : 'a newer operation took over'}>
        <span aria-hidden>{what === 'CANCELLED' ? '⊘' : '⇢'}</span> {action}_{what}
      </span>
    )
  }
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
