import type { ReactNode } from 'react'

export interface PreviewItem {
  name: string
  type: string
  action: 'create' | 'update' | 'replace' | 'delete' | 'unchanged'
  reason?: string
  changed?: string[]
  uncertain?: boolean
}
export interface PreviewResult {
  against: { templateId: string | null; traversalId: string | null; inFlight: boolean }
  items: PreviewItem[]
  summary: Record<PreviewItem['action'], number>
}

const ICON: Record<PreviewItem['action'], string> = { create: '+', update: '~', replace: '±', delete: '−', unchanged: '=' }
const ORDER: PreviewItem['action'][] = ['create', 'update', 'replace', 'delete', 'unchanged']

/** What an update would do, resource by resource (like `terraform plan`). */
export function PreviewPanel({ preview, actions }: { preview: PreviewResult; actions?: ReactNode }) {
  return (
    <section className="preview" aria-label="update preview" data-testid="preview">
      <h3>Preview</h3>
      <p>
        {ORDER.map((a) => `${preview.summary[a] ?? 0} ${a === 'update' ? 'updated in place' : a === 'replace' ? 'replaced' : a === 'create' ? 'created' : a === 'delete' ? 'deleted' : 'unchanged'}`).join(' · ')}
        {preview.against.inFlight ? ' — compared with the running traversal’s target' : ''}
      </p>
      <ul>
        {preview.items
          .filter((i) => i.action !== 'unchanged')
          .sort((a, b) => ORDER.indexOf(a.action) - ORDER.indexOf(b.action) || a.name.localeCompare(b.name))
          .map((i) => (
            <li key={i.name} className={`pv pv-${i.action}`} data-preview={i.name} data-action={i.action}>
              <code aria-hidden>{ICON[i.action]}</code> <strong>{i.name}</strong> <small>{i.type}</small> {i.action}
              {i.changed?.length ? <small> ({i.changed.join(', ')})</small> : null}
              {i.reason ? <small> — {i.reason}</small> : null}
              {i.uncertain ? <small> (known after apply)</small> : null}
            </li>
          ))}
      </ul>
      {actions}
    </section>
  )
}
