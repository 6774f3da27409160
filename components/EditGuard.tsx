'use client'
/**
 * What the stack page shows around its editor so that no update overwrites
 * another by accident (use-edit-guard.ts): a notice when the stack's
 * template changed under the open editor, the conflict a refused update
 * answered (what happened meanwhile, the diff, and the two ways on: rebase
 * the edit, or supersede knowingly), "no changes" with a way to submit
 * anyway, and the edit beside the deployed template in a merge view.
 */
import { useState } from 'react'
import type { VersionDiff } from '../lib/services/versions'
import { TemplateMerge } from './TemplateMerge'
import type { EditGuard } from './use-edit-guard'

/** A unified diff, each line marked as added, removed or context. */
export function UnifiedDiff({ text, label }: { text: string; label: string }) {
  return (
    <pre className="udiff" aria-label={label}>
      {text.split('\n').map((line, i) => (
        <span key={i} className={line.startsWith('+') && !line.startsWith('+++') ? 'add' : line.startsWith('-') && !line.startsWith('---') ? 'del' : line.startsWith('@@') ? 'hunk' : undefined}>
          {line + '\n'}
        </span>
      ))}
    </pre>
  )
}

function Changes({ diff }: { diff: VersionDiff }) {
  return (
    <>
      {diff.template ? <UnifiedDiff text={diff.template} label="template changes" /> : <p className="note">The template text is the same.</p>}
      {diff.environment ? <UnifiedDiff text={diff.environment} label="environment changes" /> : null}
      {diff.parameters.length > 0 && (
        <ul className="param-diff" aria-label="parameter changes">
          {diff.parameters.map((p) => (
            <li key={p.name}>
              <code>{p.name}</code>: {'before' in p ? <code>{JSON.stringify(p.before)}</code> : <em>(none)</em>} → {'after' in p ? <code>{JSON.stringify(p.after)}</code> : <em>(none)</em>}
              {p.hidden ? <small> (hidden)</small> : null}
            </li>
          ))}
        </ul>
      )}
    </>
  )
}

export function EditGuardView({ guard, source, onSource, busy }: { guard: EditGuard; source: string; onSource: (v: string) => void; busy: boolean }) {
  const [compare, setCompare] = useState(false)
  const { deployed, conflict } = guard
  const against = deployed ?? guard.base
  return (
    <div className="edit-guard">
      {deployed && !conflict && (
        <div role="status" className="notice" data-testid="template-changed">
          <p>
            <strong>The stack’s template changed</strong> since this edit began (now template <code>{deployed.templateId.slice(0, 8)}</code>
            {deployed.traversalId ? <>, traversal <code>{deployed.traversalId.slice(0, 8)}</code></> : null}). Submitting this edit as it is would be refused until you choose.
          </p>
          <button type="button" onClick={() => setCompare(true)}>Compare</button>
          <button type="button" onClick={() => void guard.rebase()}>Keep my edit</button>
          <button type="button" onClick={() => void guard.takeDeployed()}>Load the new template</button>
        </div>
      )}
      {conflict && (
        <div role="dialog" aria-label="update conflict" className="conflict" data-testid="conflict">
          <p><strong>Not submitted: the stack changed meanwhile.</strong></p>
          <ul className="since">
            {conflict.since.map((t) => (
              <li key={t.id}>{t.action.toLowerCase()} by {t.startedBy || 'someone'}, {t.outcome ? t.outcome.toLowerCase() : 'running'} (traversal <code>{t.id.slice(0, 8)}</code>)</li>
            ))}
          </ul>
          {conflict.diff ? <Changes diff={conflict.diff} /> : <p>{conflict.message}</p>}
          <div className="actions">
            <button type="button" onClick={() => { void guard.rebase(); setCompare(true) }} disabled={busy}>Rebase my edit on it</button>
            <button type="button" className="danger" onClick={() => void guard.supersede()} disabled={busy}>Submit anyway (replace their changes)</button>
            <button type="button" className="link" onClick={() => guard.dismiss()}>Close</button>
          </div>
        </div>
      )}
      {guard.unchanged && (
        <p role="status" className="note" data-testid="no-changes">
          No changes: the stack already converges to this template and these parameters; nothing was started.{' '}
          <button type="button" className="link" onClick={() => void guard.force()} disabled={busy}>Submit anyway</button>
        </p>
      )}
      <p>
        <button type="button" className="link" onClick={() => setCompare((c) => !c)} aria-expanded={compare} disabled={!against}>
          {compare ? 'Hide the comparison' : 'Compare with the deployed template'}
        </button>
      </p>
      {compare && against && (
        <TemplateMerge other={against.source} edited={source} onChange={onSource} otherLabel={`deployed (template ${against.templateId.slice(0, 8)})`} />
      )}
    </div>
  )
}
