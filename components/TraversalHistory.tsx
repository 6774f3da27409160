import Link from 'next/link'
import { shortId } from '../lib/ui/event-text'
import type { TraversalRow } from './stack-api'

/** Every traversal of the stack, each opening its own view: action, who started it, outcome, and which traversal superseded it. */
export function TraversalHistory({ stackId, traversals, shown }: { stackId: string; traversals: TraversalRow[]; shown: string | null }) {
  return (
    <div className="table-wrap" tabIndex={0} aria-label="traversals (scrollable)">
      <table className="grid" aria-label="traversals" data-testid="traversals">
        <thead>
          <tr><th>Started</th><th>Action</th><th>By</th><th>Outcome</th><th>Superseded by</th><th>Nodes</th></tr>
        </thead>
        <tbody>
          {traversals.map((t) => (
            <tr key={t.id} className={t.id === shown ? 'current' : ''} data-traversal={t.id}>
              <td>
                <Link href={`/stacks/${stackId}/traversals/${t.id}`} aria-label={`open traversal ${shortId(t.id)}, ${t.action.toLowerCase()} started ${new Date(t.startedAt).toLocaleString()}`}>
                  <time dateTime={t.startedAt}>{new Date(t.startedAt).toLocaleString()}</time>
                </Link>
                {t.current ? ' (current)' : ''}
              </td>
              <td>{t.action}</td>
              <td>{t.startedBy}</td>
              <td>{t.outcome ? t.outcome.toLowerCase() : t.current ? 'running' : ''}{t.outcomeReason ? <small> {t.outcomeReason}</small> : null}{t.failureReason ? <small className="error"> {t.failureReason}</small> : null}</td>
              <td>{t.supersededBy ? <Link href={`/stacks/${stackId}/traversals/${t.supersededBy}`}><code>{shortId(t.supersededBy)}</code></Link> : ''}</td>
              <td>{t.nodeCount}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}
