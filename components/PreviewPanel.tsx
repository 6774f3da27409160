/**
 * What an update would do (like `terraform plan`), grouped by action: each
 * resource with its property diff, before → after, values known only after
 * apply marked as such, and "may" where the action depends on them; then
 * the outputs and conditions that change.
 */
import type { ReactNode } from 'react'
import type { OutputChange, PreviewAction, PreviewItem, PreviewResult, PropertyChange, ValueChange } from '../lib/plan/preview-types'

export type { PreviewItem, PreviewResult }

const SIGN: Record<PreviewAction, string> = { create: '+', update: '~', replace: '-/+', delete: '−', unchanged: '=' }
const GROUPS: { action: PreviewAction; title: string }[] = [
  { action: 'replace', title: 'Replaced' },
  { action: 'create', title: 'Created' },
  { action: 'update', title: 'Updated in place' },
  { action: 'delete', title: 'Deleted' },
]
const SUMMARY: Record<PreviewAction, string> = { create: 'created', update: 'updated in place', replace: 'replaced', delete: 'deleted', unchanged: 'unchanged' }

const show = (v: unknown) => JSON.stringify(v === undefined ? null : v)

function Value({ change, side }: { change: ValueChange; side: 'before' | 'after' }) {
  if (side === 'before' ? change.beforeUnknown : change.afterUnknown) return <em className="unknown">{side === 'before' ? '(set by the running update)' : '(known after apply)'}</em>
  if (!(side in change)) return <span className="none">—</span>
  return <code>{show(change[side])}</code>
}

/** A property (or output) diff: one row per leaf that changes. */
export function ChangeTable({ changes, more }: { changes: (ValueChange & Partial<Pick<PropertyChange, 'forcesReplacement'>>)[]; more?: number }) {
  return (
    <table className="prop-diff">
      <tbody>
        {changes.map((c) => (
          <tr key={c.path} data-path={c.path}>
            <th scope="row"><code>{c.path || 'value'}</code></th>
            <td><Value change={c} side="before" /></td>
            <td aria-hidden>→</td>
            <td><Value change={c} side="after" /></td>
            <td>{c.forcesReplacement ? <small className="forces">forces replacement</small> : null}</td>
          </tr>
        ))}
        {more ? <tr><td colSpan={5}><small>… and {more} more</small></td></tr> : null}
      </tbody>
    </table>
  )
}

function Item({ item }: { item: PreviewItem }) {
  return (
    <li className={`pv pv-${item.action}`} data-preview={item.name} data-action={item.action} data-certain={String(item.certain)}>
      <div>
        <code className="sign" aria-hidden>{SIGN[item.action]}</code> <strong>{item.name}</strong>{' '}
        <small>{item.fromType ? `${item.fromType} → ${item.type}` : item.type}</small>{' '}
        {!item.certain && <span className="badge may" title="depends on values known only after apply">may</span>}
        {item.pending && <span className="badge pending" title="the running update has not reached it yet">pending</span>}
        {item.reason ? <small className="why"> — {item.reason}</small> : null}
        {item.olderRows ? <small> (also removes {item.olderRows} older row{item.olderRows > 1 ? 's' : ''})</small> : null}
      </div>
      {item.changes?.length ? <ChangeTable changes={item.changes} {...(item.moreChanges ? { more: item.moreChanges } : {})} /> : null}
    </li>
  )
}

function Outputs({ outputs }: { outputs: OutputChange[] }) {
  const changed = outputs.filter((o) => o.action !== 'unchanged')
  if (!changed.length) return null
  return (
    <div className="pv-outputs" data-testid="preview-outputs">
      <h4>Outputs</h4>
      <ul>
        {changed.map((o) => (
          <li key={o.name} data-output={o.name} data-action={o.action}>
            <strong>{o.name}</strong> {o.action}{!o.certain && <span className="badge may">may</span>}
            {o.error ? <small className="error"> — {o.error}</small> : null}
            {o.changes?.length ? <ChangeTable changes={o.changes} /> : null}
          </li>
        ))}
      </ul>
    </div>
  )
}

export function PreviewPanel({ preview, actions }: { preview: PreviewResult; actions?: ReactNode }) {
  const s = preview.summary
  const conditions = preview.conditions.filter((c) => c.before !== c.after)
  const unchanged = preview.items.filter((i) => i.action === 'unchanged')
  return (
    <section className="preview" aria-label="update preview" data-testid="preview">
      <h3>Preview</h3>
      <p data-testid="preview-summary">
        {(['create', 'update', 'replace', 'delete', 'unchanged'] as PreviewAction[]).map((a) => `${s[a]} ${SUMMARY[a]}`).join(' · ')}
        {s.uncertain ? ` (${s.uncertain} depend on values known only after apply)` : ''}
        {preview.against.inFlight ? ' — compared with where the running update is heading' : ''}
      </p>
      {GROUPS.map(({ action, title }) => {
        const items = preview.items.filter((i) => i.action === action)
        if (!items.length) return null
        return (
          <div key={action} className={`pv-group pv-group-${action}`} data-group={action}>
            <h4>{title} ({items.length})</h4>
            <ul>{items.map((i) => <Item key={i.name} item={i} />)}</ul>
          </div>
        )
      })}
      {conditions.length > 0 && (
        <div className="pv-conditions">
          <h4>Conditions</h4>
          <ul>{conditions.map((c) => <li key={c.name}><code>{c.name}</code>: {String(c.before ?? '(none)')} → {String(c.after ?? '(none)')}</li>)}</ul>
        </div>
      )}
      <Outputs outputs={preview.outputs} />
      {unchanged.length > 0 && (
        <details className="pv-unchanged">
          <summary>Unchanged ({unchanged.length})</summary>
          <ul>{unchanged.map((i) => <Item key={i.name} item={i} />)}</ul>
        </details>
      )}
      {actions}
    </section>
  )
}
