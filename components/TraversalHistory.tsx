import type { TraversalRow } from './use-stack-live'

/** Every traversal of the stack: action, who started it, outcome, and which traversal superseded it. */
export function TraversalHistory({ traversals }: { traversals: TraversalRow[] }) {
  return (
    <table className="grid" aria-label="traversals" data-testid="traversals">
      <thead>
        <tr><th>Started</th><th>Action</th><th>By</th><th>Outcome</th><th>Superseded by</th><th>Nodes</th></tr>
      </thead>
      <tbody>
        {traversals.map((t) => (
          <tr key={t.id} className={t.current ? 'current' : ''}>
            <td><time>{new Date(t.startedAt).toLocaleString()}</time>{t.current ? ' (current)' : ''}</td>
            <td>{t.action}</td>
            <td>{t.startedBy}</td>
            <td>{t.outcome ?? (t.current ? 'running' : '')}{t.outcomeReason ? <small> {t.outcomeReason}</small> : null}{t.failureReason ? <small className="error"> {t.failureReason}</small> : null}</td>
            <td>{t.supersededBy ? <code>{t.supersededBy.slice(0, 8)}</code> : ''}</td>
            <td>{t.nodeCount}</td>
          </tr>
        ))}
      </tbody>
    </table>
  )
}
