'use client'
/**
 * The HOT template editor: CodeMirror 6 with YAML highlighting and the
 * validate endpoint's issues drawn inline at their line and column (and
 * listed under the editor, each a button that moves the cursor there).
 */
import { yaml } from '@codemirror/lang-yaml'
import { lintGutter, setDiagnostics, type Diagnostic } from '@codemirror/lint'
import { EditorState } from '@codemirror/state'
import { EditorView } from '@codemirror/view'
import { basicSetup } from 'codemirror'
import { useEffect, useRef } from 'react'
import type { ApiIssue } from './api'
import type { Validation } from './use-validation'

function toDiagnostics(state: EditorState, issues: ApiIssue[]): Diagnostic[] {
  const doc = state.doc
  return issues.map((i) => {
    const line = doc.line(Math.min(Math.max(i.line ?? 1, 1), doc.lines))
    const from = Math.min(line.from + Math.max((i.column ?? 1) - 1, 0), line.to)
    return { from, to: Math.min(line.to, from + 1), severity: 'error', message: `${i.path ? i.path + ': ' : ''}${i.message}` }
  })
}

export function TemplateEditor({ value, onChange, issues, label }: { value: string; onChange: (v: string) => void; issues: ApiIssue[]; label: string }) {
  const host = useRef<HTMLDivElement>(null)
  const view = useRef<EditorView | null>(null)
  const changeRef = useRef(onChange)
  changeRef.current = onChange

  useEffect(() => {
    if (!host.current) return
    const v = new EditorView({
      parent: host.current,
      state: EditorState.create({
        doc: value,
        extensions: [
          basicSetup,
          yaml(),
          lintGutter(),
          EditorView.contentAttributes.of({ 'aria-label': label }),
          EditorView.updateListener.of((u) => u.docChanged && changeRef.current(u.state.doc.toString())),
        ],
      }),
    })
    view.current = v
    return () => v.destroy()
    // the editor owns the text after mount; `value` changes from outside are applied below
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [])

  useEffect(() => {
    const v = view.current
    if (v && v.state.doc.toString() !== value) v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: value } })
  }, [value])

  useEffect(() => {
    const v = view.current
    if (v) v.dispatch(setDiagnostics(v.state, toDiagnostics(v.state, issues)))
  }, [issues, value])

  const jump = (i: ApiIssue) => {
    const v = view.current
    if (!v || !i.line) return
    const line = v.state.doc.line(Math.min(i.line, v.state.doc.lines))
    const pos = Math.min(line.from + Math.max((i.column ?? 1) - 1, 0), line.to)
    v.dispatch({ selection: { anchor: pos }, scrollIntoView: true })
    v.focus()
  }

  return (
    <div className="editor">
      <div ref={host} className="editor-host" data-testid="template-editor" />
      {issues.length > 0 && (
        <ul className="issues" aria-label="template problems" data-testid="template-issues">
          {issues.map((i, k) => (
            <li key={k}>
              <button type="button" className="link" onClick={() => jump(i)}>
                {i.line ? `line ${i.line}, column ${i.column ?? 1}` : 'template'}
              </button>{' '}
              <code>{i.path}</code>: {i.message}
            </li>
          ))}
        </ul>
      )}
    </div>
  )
}

/** The live validation result under an editor (announced to screen readers). */
export function ValidationLine({ validation: v }: { validation: Validation }) {
  return (
    <p className="validation" aria-live="polite" data-testid="validation">
      {v.pending ? 'checking…' : v.valid ? '✓ template is valid' : v.valid === false ? `✗ ${v.message}` : ''}
    </p>
  )
}
