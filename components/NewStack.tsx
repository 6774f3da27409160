'use client'
/** Create a stack from the editor: a name, a template (starts from a small example), parameters, rollback choice. */
import { useRouter } from 'next/navigation'
import { useState } from 'react'
import { api, ApiError, type ApiIssue } from './api'
import { ParametersForm, parameterValues } from './ParametersForm'
import { TemplateEditor, ValidationLine } from './TemplateEditor'
import { useValidation } from './use-validation'

export const EXAMPLE = `heat_template_version: 2021-04-16
description: A small chain; each resource waits for the one before.

parameters:
  wait:
    type: number
    default: 1
    description: seconds each resource takes

resources:
  network:
    type: OS::Heat::TestResource
    properties:
      value: net
      action_wait_secs: { create: { get_param: wait }, update: { get_param: wait } }
  subnet:
    type: OS::Heat::TestResource
    properties:
      value: { get_attr: [network, output] }
      action_wait_secs: { create: { get_param: wait }, update: { get_param: wait } }
  server:
    type: OS::Heat::TestResource
    properties:
      value: { get_attr: [subnet, output] }
      action_wait_secs: { create: { get_param: wait }, update: { get_param: wait } }

outputs:
  server_value:
    value: { get_attr: [server, output] }
`

export function NewStack() {
  const router = useRouter()
  const [name, setName] = useState('')
  const [source, setSource] = useState(EXAMPLE)
  const [params, setParams] = useState<Record<string, string>>({})
  const [rollback, setRollback] = useState(true)
  const [issues, setIssues] = useState<ApiIssue[]>([])
  const [error, setError] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  const validation = useValidation(source)
  const allIssues = issues.length ? issues : validation.issues

  return (
    <section>
      <h1>New stack</h1>
      <form
        onSubmit={async (e) => {
          e.preventDefault()
          setBusy(true)
          setError(null)
          try {
            const r = await api<{ stack: { id: string } }>('POST', '/api/stacks', { name: name.trim(), template: source, parameters: parameterValues(params), disableRollback: !rollback })
            router.push(`/stacks/${r.stack.id}`)
          } catch (err) {
            setIssues(err instanceof ApiError ? err.issues : [])
            setError((err as Error).message)
            setBusy(false)
          }
        }}
      >
        <label className="field">
          Name <input value={name} onChange={(e) => setName(e.target.value)} required maxLength={255} aria-label="stack name" pattern="[A-Za-z][A-Za-z0-9_.\-]*" title="starts with a letter; letters, digits, _ . -" />
        </label>
        <TemplateEditor value={source} onChange={(v) => { setSource(v); setIssues([]) }} issues={allIssues} label="template" />
        <ValidationLine validation={validation} />
        <ParametersForm parameters={validation.parameters} values={params} onChange={setParams} />
        <label className="field checkbox">
          <input type="checkbox" checked={rollback} onChange={(e) => setRollback(e.target.checked)} /> Roll back automatically if the create fails
        </label>
        <div className="actions">
          <button type="submit" className="primary" disabled={busy || !name.trim()}>{busy ? 'Creating…' : 'Create stack'}</button>
        </div>
        {error && <p role="alert" className="error" data-testid="message">{error}</p>}
      </form>
    </section>
  )
}
