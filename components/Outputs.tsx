'use client'
/** The stack's outputs, read when the tab opens (resolving them evaluates the template) and again after each event batch that ended a traversal. */
import { useEffect, useState } from 'react'
import { api } from './api'
import { OutputValue } from './OutputValue'

type Output = { value: unknown; description?: string; error?: string; sensitive?: boolean }

export function Outputs({ stackId, version }: { stackId: string; version: number }) {
  const [outputs, setOutputs] = useState<Record<string, Output> | null>(null)
  const [error, setError] = useState<string | null>(null)
  useEffect(() => {
    let live = true
    api<{ outputs: Record<string, Output> }>('GET', `/api/stacks/${stackId}/outputs`)
      .then((r) => live && (setOutputs(r.outputs), setError(null)))
      .catch((e: Error) => live && setError(e.message))
    return () => {
      live = false
    }
  }, [stackId, version])
  if (error) return <p role="alert" className="error">The outputs could not be read: {error}</p>
  if (!outputs) return <p>Loading the outputs…</p>
  return (
    <dl className="outputs" data-testid="outputs">
      {Object.entries(outputs).map(([k, o]) => (
        <div key={k}><dt>{k}</dt><dd><OutputValue stackId={stackId} name={k} output={o} />{o.description ? <small> {o.description}</small> : null}</dd></div>
      ))}
      {Object.keys(outputs).length === 0 && <p>No outputs.</p>}
    </dl>
  )
}
