'use client'
/**
 * The drawer for an inspected node, over the page's right edge (it never
 * widens the page): state, worker, lock, what happened to it in plain words,
 * its properties and attributes (fetched when it opens), what the current
 * drift check found (the diff: property, stored, seen) and its history in
 * this traversal. Focus moves into it when it opens; Escape or the close
 * button closes it, and the page puts focus back where it came from.
 */
import Link from 'next/link'
import { useEffect, useRef, useState } from 'react'
import { describeEvent, shortId, workerName, type WorkerNames } from '../lib/ui/event-text'
import { DRIFT_ICON, type DriftChange, type DriftMark } from '../lib/ui/drift'
import { hookOf, type DisplayNode } from '../lib/ui/graph-model'
import { api } from './api'
import { LOOKS, stateText } from './graph-style'
import { notesOf } from './ResourcesTable'

interface RowDetail {
  type: string
  action: string
  status: string
  statusReason: string
  physicalId: string | null
  properties: Record<string, unknown> | null
  attributes: Record<string, unknown>
  lock: { worker: string | null; workerName: string | null; traversalId: string | null; leaseExpiresAt: string | null; parked: boolean } | null
  /** the current drift check's finding, values masked */
  drift: { state: string; changes: DriftChange[]; problems: string[]; observedAt: string; traversalId: string } | null
}

/** A row's status reason that only says the engine moved it on: the "Last event" line says what happened. */
const ENGINE_REASONS = new Set(['state changed'])

export function NodePanel({ stackId, node, version, workers, onClose }: { stackId: string; node: DisplayNode; version: number; workers: WorkerNames; onClose: () => void }) {
  const closeButton = useRef<HTMLButtonElement>(null)
  const [row, setRow] = useState<RowDetail | null>(null)
  const [rowError, setRowError] = useState<string | null>(null)

  useEffect(() => {
    closeButton.current?.focus()
  }, [node.id])

  // The row as stored, again when the node's state changes (its lock, its attributes) or a drift check looked at it (the diff).
  const driftKey = node.drift ? `${node.drift.traversalId}:${node.drift.state}:${node.drift.at}` : ''
  useEffect(() => {
    let live = true
    api<{ resource: RowDetail }>('GET', `/api/stacks/${stackId}/resources/${node.rowId}`)
      .then((r) => live && (setRow(r.resource), setRowError(null)))
      .catch((e: Error) => live && setRowError(e.message))
    return () => {
      live = false
    }
  }, [stackId, node.rowId, node.state, driftKey])

  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape' && !document.querySelector('dialog[open]')) {
        e.preventDefault()
        onClose()
      }
    }
    document.addEventListener('keydown', onKey)
    return () => document.removeEventListener('keydown', onKey)
  }, [onClose])

  const reason = node.last ? describeEvent(node.last, workers) : ''
  const notes = notesOf(node)
  // Parked at a hook of the environment (pre-create, …): Continue clears it, as `openstack stack hook clear` does.
  const hook = hookOf(node)
  return (
    <div className="node-panel" role="dialog" aria-modal="false" aria-labelledby="node-panel-title" data-testid="node-panel" data-version={version}>
      <header>
        <h2 id="node-panel-title">
          <span aria-hidden>{LOOKS[node.state].icon}</span> {node.name} <small>#{node.rowId}</small>
        </h2>
        <button ref={closeButton} type="button" className="icon" onClick={onClose} aria-label="close the resource panel">✕</button>
      </header>
      <dl>
        <dt>Type</dt><dd>{row?.type ?? node.type}</dd>
        <dt>Node state</dt><dd data-testid="node-state">{stateText(node)}</dd>
        {reason && (<><dt>Last event</dt><dd className={node.state === 'failed' ? 'error' : ''} data-testid="node-reason">{reason}</dd></>)}
        {row && (<><dt>Row now</dt><dd>{row.action}_{row.status}</dd></>)}
        {row?.statusReason && !ENGINE_REASONS.has(row.statusReason) && (<><dt>Status reason</dt><dd>{row.statusReason}</dd></>)}
        {row?.physicalId && (<><dt>Physical id</dt><dd><code>{row.physicalId}</code></dd></>)}
        {(node.worker || node.lastWorker) && (<><dt>Worker</dt><dd>{workerName(node.worker ?? node.lastWorker, workers)}{node.worker ? ' (acting now)' : ''}</dd></>)}
        {row?.lock && (
          <><dt>Lock</dt><dd>{row.lock.parked
            ? 'held while the action waits, by no worker (parked: it holds no worker slot)'
            : <>held by {row.lock.workerName ?? workerName(row.lock.worker, workers)}{row.lock.leaseExpiresAt ? `, lease until ${new Date(row.lock.leaseExpiresAt).toLocaleTimeString()}` : ''}</>}</dd></>
        )}
        {node.blockedBy && (
          <><dt>Blocked by</dt><dd>traversal <Link href={`/stacks/${stackId}/traversals/${node.blockedBy}`}><code>{shortId(node.blockedBy)}</code></Link>{node.blockedHolder ? ` on ${workerName(node.blockedHolder, workers)}` : ''}</dd></>
        )}
        {notes.length > 0 && (<><dt>Notes</dt><dd>{notes.join(', ')}</dd></>)}
      </dl>
      {hook && <HookGate stackId={stackId} resource={node.name} hook={hook} />}
      {rowError && <p className="error">The row could not be read: {rowError}</p>}
      {node.drift && <DriftFinding mark={node.drift} listed={row?.drift?.traversalId === node.drift.traversalId ? row.drift.changes : null} />}
      {row?.properties && (
        <details open>
          <summary>Properties</summary>
          <pre tabIndex={0}>{JSON.stringify(row.properties, null, 2)}</pre>
        </details>
      )}
      {row && Object.keys(row.attributes).length > 0 && (
        <details>
          <summary>Attributes</summary>
          <pre tabIndex={0}>{JSON.stringify(row.attributes, null, 2)}</pre>
        </details>
      )}
      <details open>
        <summary>History in this traversal</summary>
        <ol className="history">
          {node.history.map((h) => (
            <li key={`${h.seq}-${h.state}`}>
              <time dateTime={h.at}>{new Date(h.at).toLocaleTimeString()}</time> {describeEvent(h.event, workers)}
            </li>
          ))}
        </ol>
      </details>
    </div>
  )
}

/** A node waiting at a hook: what it waits for, and the button that lets it go on. */
function HookGate({ stackId, resource, hook }: { stackId: string; resource: string; hook: string }) {
  const [state, setState] = useState<{ busy: boolean; error: string | null }>({ busy: false, error: null })
  const clear = () => {
    setState({ busy: true, error: null })
    api('POST', `/api/stacks/${stackId}/resources/${encodeURIComponent(resource)}/signal`, { unset_hook: hook })
      .then(() => setState({ busy: false, error: null }))
      .catch((e: Error) => setState({ busy: false, error: e.message }))
  }
  return (
    <section className="hook-gate" aria-labelledby="node-hook-title" data-testid="node-hook">
      <h3 id="node-hook-title">Waiting at a hook</h3>
      <p>The environment sets a <code>{hook}</code> hook on {resource}: the operation stops here until it is cleared.</p>
      <button type="button" onClick={clear} disabled={state.busy}>Continue (clear the {hook} hook)</button>
      {state.error && <p className="error" role="alert">{state.error}</p>}
    </section>
  )
}

const shown = (v: unknown) => JSON.stringify(v === undefined ? null : v)

/**
 * What the drift check found: in sync (and when), or modified with each
 * property as Kiln stored it and as it was seen (masked by the API), gone, or
 * not checked (why). The values come from the row (`listed`) or the mark;
 * a mark from the live events names the properties until the row is read.
 */
function DriftFinding({ mark, listed }: { mark: DriftMark; listed: DriftChange[] | null }) {
  const at = new Date(mark.at).toLocaleString()
  const changes = listed ?? mark.changes ?? null
  return (
    <section className="drift-diff" aria-labelledby="node-drift-title" data-testid="node-drift" data-drift={mark.state}>
      <h3 id="node-drift-title">Drift</h3>
      {mark.state === 'IN_SYNC' && <p>In sync, checked at <time dateTime={mark.at}>{at}</time>.</p>}
      {mark.state === 'NOT_CHECKED' && <p>Not checked (at <time dateTime={mark.at}>{at}</time>){mark.problems.length ? `: ${mark.problems.join('; ')}` : '.'}</p>}
      {mark.state === 'DELETED' && (
        <p className="drift-inline"><span aria-hidden>{DRIFT_ICON.DELETED}</span> Gone: deleted outside Kiln (checked at <time dateTime={mark.at}>{at}</time>). An update with converge makes it again.</p>
      )}
      {mark.state === 'MODIFIED' && (
        <>
          <p className="drift-inline"><span aria-hidden>{DRIFT_ICON.MODIFIED}</span> Modified outside Kiln (checked at <time dateTime={mark.at}>{at}</time>). An update with converge brings it back.</p>
          {changes ? (
            <table className="prop-diff" aria-label="drift: stored and seen values">
              <thead>
                <tr><th scope="col">Property</th><th scope="col">Stored by Kiln</th><th scope="col">Seen now</th></tr>
              </thead>
              <tbody>
                {changes.map((c) => (
                  <tr key={c.property} data-property={c.property}>
                    <th scope="row"><code>{c.property}</code></th>
                    <td><code>{shown(c.stored)}</code></td>
                    <td><code>{shown(c.seen)}</code></td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : (
            mark.changed.length > 0 && <p>Changed: {mark.changed.map((p) => <code key={p}>{p} </code>)}</p>
          )}
          {mark.problems.length > 0 && <ul>{mark.problems.map((p) => <li key={p}>{p}</li>)}</ul>}
        </>
      )}
    </section>
  )
}
