'use client'
/**
 * Create a stack: a name, a template (from an example, a file, or typed),
 * parameters, timeout, tags and the rollback choice. The Create button says
 * why it is disabled.
 */
import { useRouter } from 'next/navigation'
import { useState } from 'react'
import { api, ApiError, type ApiIssue } from './api'
import { EXAMPLES } from './examples'
import { ParametersForm, parameterValues } from './ParametersForm'
import { TemplateEditor, ValidationLine } from './TemplateEditor'
import { useValidation } from './use-validation'

const NAME = /^[A-Za-z][A-Za-z0-9_.-]*$/
const MAX_FILE_BYTES = 4 << 20

export function NewStack() {
  const router = useRouter()
  const [name, setName] = useState('')
  const [source, setSource] = useState(EXAMPLES[0]!.source)
  const [params, setParams] = useState<Record<string, string>>({})
  const [rollback, setRollback] = useState(true)
  const [timeout, setTimeoutMins] = useState('')
  const [tags, setTags] = useState('')
  const [issues, setIssues] = useState<ApiIssue[]>([])
  const [error, setError] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  const validation = useValidation(source)
  const allIssues = issues.length ? issues : validation.issues

  const timeoutValue = timeout.trim() === '' ? null : Number(timeout)
  const tagList = tags.split(',').map((t) => t.trim()).filter(Boolean)
  const why = !name.trim()
    ? 'Give the stack a name.'
    : !NAME.test(name.trim())
      ? 'The name must start with a letter and hold only letters, digits, _ . and -.'
      : !source.trim()
        ? 'Write or load a template.'
        : validation.valid === false
          ? 'Fix the template problems listed above.'
          : timeoutValue !== null && !(Number.isInteger(timeoutValue) && timeoutValue >= 1 && timeoutValue <= 10080)
            ? 'The timeout is a whole number of minutes from 1 to 10080.'
            : tagList.some((t) => t.length > 80)
              ? 'A tag is at most 80 characters.'
              : null

  const load = (text: string) => {
    setSource(text)
    setIssues([])
    setParams({})
  }

  return (
    <section className="new-stack">
      <h1>New stack</h1>
      <form
        onSubmit={async (e) => {
          e.preventDefault()
          if (why) return
          setBusy(true)
          setError(null)
          try {
            const r = await api<{ stack: { id: string } }>('POST', '/api/stacks', {
              name: name.trim(), template: source, parameters: parameterValues(params), disableRollback: !rollback,
              ...(timeoutValue !== null ? { timeoutMins: timeoutValue } : {}), ...(tagList.length ? { tags: tagList } : {}),
            })
            router.push(`/stacks/${r.stack.id}`)
          } catch (err) {
            setIssues(err instanceof ApiError ? err.issues : [])
            setError((err as Error).message)
            setBusy(false)
          }
        }}
      >
        <label className="field">
          Name <input value={name} onChange={(e) => setName(e.target.value)} required maxLength={255} aria-label="stack name" autoComplete="off" />
        </label>
        <div className="field-row">
          <label>
            Start from an example
            <select aria-label="start from an example" defaultValue="" onChange={(e) => { const x = EXAMPLES.find((t) => t.id === e.target.value); if (x) load(x.source) }}>
              <option value="" disabled>choose…</option>
              {EXAMPLES.map((x) => <option key={x.id} value={x.id}>{x.title}</option>)}
            </select>
          </label>
          <label>
            or a file (YAML or JSON)
            <input
              type="file"
              accept=".yaml,.yml,.json,.template,text/yaml,application/json,text/plain"
              aria-label="upload a template file"
              onChange={async (e) => {
                const f = e.target.files?.[0]
                if (!f) return
                if (f.size > MAX_FILE_BYTES) return setError(`${f.name} is ${Math.round(f.size / 1024)} KiB; a template may be at most ${MAX_FILE_BYTES >> 20} MiB`)
                setError(null)
                load(await f.text())
              }}
            />
          </label>
        </div>
        <TemplateEditor value={source} onChange={(v) => { setSource(v); setIssues([]) }} issues={allIssues} label="template" />
        <ValidationLine validation={validation} />
        <ParametersForm parameters={validation.parameters} values={params} onChange={setParams} />
        <div className="field-row">
          <label>
            Timeout (minutes)
            <input type="number" min={1} max={10080} step={1} inputMode="numeric" value={timeout} onChange={(e) => setTimeoutMins(e.target.value)} placeholder="server default" aria-label="timeout in minutes" />
          </label>
          <label>
            Tags (comma-separated)
            <input value={tags} onChange={(e) => setTags(e.target.value)} placeholder="team-a, staging" aria-label="tags" />
          </label>
        </div>
        <label className="field checkbox">
          <input type="checkbox" checked={rollback} onChange={(e) => setRollback(e.target.checked)} /> Roll back automatically if the create fails
        </label>
        <div className="actions">
          <button type="submit" className="primary" disabled={busy || why !== null} aria-describedby="create-why">{busy ? 'Creating…' : 'Create stack'}</button>
          <span id="create-why" className="why" aria-live="polite">{busy ? '' : why ?? ''}</span>
        </div>
        {error && <p role="alert" className="error" data-testid="message">{error}</p>}
      </form>
    </section>
  )
}
