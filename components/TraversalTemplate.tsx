'use client'
/** The template and parameters a past traversal ran with (hidden parameters masked by the server). */
import { useEffect, useState } from 'react'
import { api } from './api'

export function TraversalTemplate({ stackId, traversalId }: { stackId: string; traversalId: string }) {
  const [t, setT] = useState<{ source: string; parameters: Record<string, unknown>; environment: Record<string, unknown> } | null>(null)
  const [error, setError] = useState<string | null>(null)
  useEffect(() => {
    api<{ source: string; parameters: Record<string, unknown>; environment: Record<string, unknown> }>('GET', `/api/stacks/${stackId}/traversals/${traversalId}/template`)
      .then(setT, (e: Error) => setError(e.message))
  }, [stackId, traversalId])
  if (error) return <p role="alert" className="error">The template could not be read: {error}</p>
  if (!t) return <p>Loading the template…</p>
  return (
    <div className="traversal-template" data-testid="traversal-template">
      <h3>Parameters</h3>
      {Object.keys(t.parameters).length ? (
        <dl className="outputs">{Object.entries(t.parameters).map(([k, v]) => <div key={k}><dt>{k}</dt><dd><code>{JSON.stringify(v)}</code></dd></div>)}</dl>
      ) : <p>None.</p>}
      <h3>Template</h3>
      <pre className="source" tabIndex={0} aria-label="template source">{t.source}</pre>
    </div>
  )
}
