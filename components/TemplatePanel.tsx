'use client'
/**
 * The stack page's editor: the current template in CodeMirror, the
 * parameters form, Preview (what the update would create, update, replace or
 * delete) and Submit (while a traversal runs, it supersedes it), with two
 * choices, both off by default: converge (look at every resource and bring
 * back what drifted) and, while an operation runs, preempt (abort its
 * in-flight actions on the resources this update changes).
 */
import { useEffect, useId, useState } from 'react'
import { api, ApiError, type ApiIssue } from './api'
import { ParametersForm, parameterValues } from './ParametersForm'
import { EditGuardView } from './EditGuard'
import { PreviewPanel, type PreviewResult } from './PreviewPanel'
import { TemplateEditor, ValidationLine } from './TemplateEditor'
import { useEditGuard, type UpdateBody } from './use-edit-guard'
import { parametersOf, useValidation } from './use-validation'

export type Runner = (what: string, fn: () => Promise<string>) => Promise<ApiError | Error | null>

/**
 * `stack`: the page's live copy of the stack (a new template version under the open editor is noticed from it);
 * `onStarted`: an update the edit guard sent on the user's choice (supersede knowingly, force) started.
 */
export function TemplatePanel({ stackId, stack, running, disabled, busy, run, onStarted }: { stackId: string; stack: object | null; running: boolean; disabled: boolean; busy: boolean; run: Runner; onStarted: () => void }) {
  const [loaded, setLoaded] = useState<{ source: string; template: Record<string, unknown> } | null>(null)
  const [loadError, setLoadError] = useState<string | null>(null)
  const [source, setSource] = useState<string | null>(null)
  const [params, setParams] = useState<Record<string, string>>({})
  const [issues, setIssues] = useState<ApiIssue[]>([])
  const [preview, setPreview] = useState<PreviewResult | null>(null)
  const [converge, setConverge] = useState(false)
  const [preempt, setPreempt] = useState(false)
  const ids = useId()
  const edited = loaded !== null && source !== null && source !== loaded.source
  const validation = useValidation(source ?? '', { skip: !edited, parameters: parametersOf(loaded?.template) })
  // Every update names the version this edit was written against; a stale edit is refused and shown, never applied.
  const guard = useEditGuard(stackId, stack, setSource, () => onStarted())

  useEffect(() => {
    api<{ source: string; template: Record<string, unknown> }>('GET', `/api/stacks/${stackId}/template`)
      .then((t) => {
        setLoaded({ source: t.source, template: t.template })
        setSource((s) => s ?? t.source)
      })
      .catch((e: Error) => {
        setLoadError(e.message)
        setSource((s) => s ?? '')
      })
  }, [stackId])

  // Preempting only means something while an operation runs: the choice is dropped when it ends.
  useEffect(() => {
    if (!running) setPreempt(false)
  }, [running])

  const body = () => ({ template: source ?? '', parameters: parameterValues(params) })
  /** The update's body: the preview's, plus the choices only an update honours (a preview refuses them). */
  const updateBody = (): UpdateBody => ({ ...body(), ...(converge ? { converge: true as const } : {}), ...(preempt && running ? { preempt: true as const } : {}) })
  const withIssues = async (what: string, fn: () => Promise<string>) => {
    const err = await run(what, fn)
    setIssues(err instanceof ApiError ? err.issues : [])
  }
  const submit = () =>
    withIssues('Update', async () => {
      const sent = updateBody()
      const r = await guard.update(sent)
      // Refused (the stack changed meanwhile) or unchanged: the guard shows which, and what to do.
      if (!r) return 'Nothing was started: see the note below the editor.'
      setPreview(null)
      setConverge(false)
      setPreempt(false)
      setLoaded((l) => (l ? { ...l, source: source ?? l.source } : l))
      const how = [sent.converge ? 'converging drifted resources' : '', sent.preempt ? 'preempting the running update' : ''].filter(Boolean).join(', ')
      const what = how ? `Update submitted (${how})` : 'Update submitted'
      return r.superseded && running ? `${what}; it superseded traversal ${r.superseded.slice(0, 8)}.` : `${what}.`
    })
  const doPreview = () =>
    withIssues('Preview', async () => {
      const r = await api<PreviewResult>('POST', `/api/stacks/${stackId}/preview`, body())
      setPreview(r)
      return `Preview: ${r.summary.create ?? 0} created, ${r.summary.update ?? 0} updated in place, ${r.summary.replace ?? 0} replaced, ${r.summary.delete ?? 0} deleted.`
    })

  return (
    <section className="template-panel" aria-label="template">
      <h2>Template</h2>
      {loadError && <p className="error">The template could not be read: {loadError}</p>}
      {source === null ? <p>Loading the template…</p> : <TemplateEditor value={source} onChange={(v) => { setSource(v); setIssues([]) }} issues={issues.length ? issues : validation.issues} label="template" />}
      <ValidationLine validation={validation} />
      <ParametersForm parameters={validation.parameters} values={params} onChange={setParams} />
      {running && <p className="note" data-testid="supersede-note">A traversal is running. Submitting now <strong>supersedes</strong> it: rows it still holds are handed over (retriggered) when their worker finishes, never replaced needlessly.</p>}
      <fieldset className="submit-options">
        <legend className="sr-only">update options</legend>
        <div>
          <label>
            <input type="checkbox" checked={converge} onChange={(e) => setConverge(e.target.checked)} aria-describedby={`${ids}-converge`} data-testid="converge" />
            Converge (bring back drifted resources)
          </label>
          <small id={`${ids}-converge`}>Looks at every resource and rewrites what was changed or deleted outside Kiln, even where the template did not change.</small>
        </div>
        {running && (
          <div>
            <label>
              <input type="checkbox" checked={preempt} onChange={(e) => setPreempt(e.target.checked)} aria-describedby={`${ids}-preempt`} data-testid="preempt" />
              Preempt the running update
            </label>
            <small id={`${ids}-preempt`}>Aborts its in-flight actions on the resources this update changes, instead of waiting for them to finish.</small>
          </div>
        )}
      </fieldset>
      <div className="actions">
        <button type="button" onClick={doPreview} disabled={busy || disabled || source === null}>Preview</button>
        <button type="button" className="primary" onClick={submit} disabled={busy || disabled || source === null}>{running ? 'Submit (supersede)' : 'Submit update'}</button>
      </div>
      {source !== null && <EditGuardView guard={guard} source={source} onSource={setSource} busy={busy} />}
      {preview && <PreviewPanel preview={preview} />}
    </section>
  )
}
