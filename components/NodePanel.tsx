'use client'
/** The side panel for a clicked node: state, lock, reason, properties, attributes, its history in this traversal. */
import type { DisplayNode, ResourceRow } from '../lib/ui/graph-model'
import { LOOKS, stateText } from './graph-style'
import { notesOf } from './ResourcesTable'

export function NodePanel({ node, row, onClose }: { node: DisplayNode; row: ResourceRow | undefined; onClose: () => void }) {
  return (
    <aside className="node-panel" aria-label={`resource ${node.name}`} data-testid="node-panel">
      <header>
        <h3>
          <span aria-hidden>{LOOKS[node.state].icon}</span> {node.name} <small>#{node.rowId}</small>
        </h3>
        <button type="button" className="link" onClick={onClose} aria-label="close panel">✕</button>
      </header>
      <dl>
        <dt>Type</dt><dd>{row?.type ?? node.type}</dd>
        <dt>Node state</dt><dd data-testid="node-state">{stateText(node)}</dd>
        {row && (<><dt>Row</dt><dd>{row.action}_{row.status}</dd></>)}
        {node.reason && (<><dt>Reason</dt><dd className={node.state === 'failed' ? 'error' : ''}>{node.reason}</dd></>)}
        {row?.statusReason && row.statusReason !== node.reason && (<><dt>Status reason</dt><dd>{row.statusReason}</dd></>)}
        {row?.physicalId && (<><dt>Physical id</dt><dd><code>{row.physicalId}</code></dd></>)}
        {(node.worker || row?.lock) && (<><dt>Lock</dt><dd>{row?.lock ? `held by ${row.lock.workerName ?? row.lock.worker}, lease until ${row.lock.leaseExpiresAt ? new Date(row.lock.leaseExpiresAt).toLocaleTimeString() : '?'}` : `worker ${node.worker}`}</dd></>)}
        {node.blockedBy && (<><dt>Blocked by</dt><dd>traversal <code>{node.blockedBy.slice(0, 8)}</code></dd></>)}
        {notesOf(node).length > 0 && (<><dt>Notes</dt><dd>{notesOf(node).join(', ')}</dd></>)}
      </dl>
      {row?.properties && (
        <details open>
          <summary>Properties</summary>
          <pre>{JSON.stringify(row.properties, null, 2)}</pre>
        </details>
      )}
      {row?.attributes && Object.keys(row.attributes).length > 0 && (
        <details>
          <summary>Attributes</summary>
          <pre>{JSON.stringify(row.attributes, null, 2)}</pre>
        </details>
      )}
      <details open>
        <summary>History in this traversal</summary>
        <ol className="history">
          {node.history.map((h) => (
            <li key={h.seq}>
              <time>{new Date(h.at).toLocaleTimeString()}</time> {h.state ?? ''} <small>{h.reason}</small>
            </li>
          ))}
        </ol>
      </details>
    </aside>
  )
}
