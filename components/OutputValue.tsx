'use client'
/**
 * One output's value on the stack page. A sensitive output (evaluated from a
 * secret) arrives masked; its value is fetched only when the member presses
 * Reveal, by name (GET …/outputs/{key}?reveal=true), and kept on this page only.
 */
import { useState } from 'react'
import { api, ApiError } from './api'

export interface ShownOutput {
  value: unknown
  error?: string
  sensitive?: boolean
}

export function OutputValue({ stackId, name, output }: { stackId: string; name: string; output: ShownOutput }) {
  const [revealed, setRevealed] = useState<{ value: unknown } | null>(null)
  const [problem, setProblem] = useState<string | null>(null)
  if (output.error) return <span className="error">{output.error}</span>
  if (!output.sensitive) return <code>{JSON.stringify(output.value)}</code>
  if (revealed) {
    return (
      <span>
        <code data-testid={`output-${name}-revealed`}>{JSON.stringify(revealed.value)}</code> <button type="button" onClick={() => setRevealed(null)}>Hide</button>
      </span>
    )
  }
  const reveal = async () => {
    setProblem(null)
    try {
      const res = await api<{ output: ShownOutput }>('GET', `/api/stacks/${encodeURIComponent(stackId)}/outputs/${encodeURIComponent(name)}?reveal=true`)
      setRevealed({ value: res.output.value })
    } catch (err) {
      setProblem(err instanceof ApiError ? err.message : String(err))
    }
  }
  return (
    <span>
      <code title="sensitive: evaluated from a secret">******</code> <button type="button" onClick={() => void reveal()}>Reveal</button>
      {problem && <span className="error"> {problem}</span>}
    </span>
  )
}
