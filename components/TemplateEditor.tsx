'use client'
/**
 * The HOT template editor: CodeMirror 6 with YAML highlighting, the
 * validate endpoint's issues drawn inline at their line and column (and
 * listed under the editor, each a button that moves the cursor there), and
 * the resource types the project may use completed after `type:`.
 */
import { yaml } from '@codemirror/lang-yaml'
import { HighlightStyle, syntaxHighlighting } from '@codemirror/language'
import { lintGutter, setDiagnostics, type Diagnostic } from '@codemirror/lint'
import { Compartment, EditorState } from '@codemirror/state'
import { EditorView } from '@codemirror/view'
import { tags as t } from '@lezer/highlight'
import { basicSetup } from 'codemirror'
import { useEffect, useRef } from 'react'
import { api, type ApiIssue } from './api'
import { typeCompletions } from '../lib/ui/type-completion'
import type { Theme } from './graph-style'
import { useTheme } from './theme'
import type { Validation } from './use-validation'

/** Syntax colours with a contrast of at least 4.5:1 on the editor's background, in each theme. */
const HIGHLIGHT: Record<Theme, HighlightStyle> = {
  light: HighlightStyle.define([
    { tag: [t.propertyName, t.definition(t.propertyName)], color: '#1e40af' },
    { tag: [t.string, t.special(t.string), t.content], color: '#166534' },
    { tag: t.number, color: '#9a3412' },
    { tag: [t.keyword, t.bool, t.null, t.atom], color: '#6b21a8' },
    { tag: t.comment, color: '#4b5563', fontStyle: 'italic' },
    { tag: [t.meta, t.punctuation, t.separator, t.brace, t.squareBracket], color: '#374151' },
  ]),
  dark: HighlightStyle.define([
    { tag: [t.propertyName, t.definition(t.propertyName)], color: '#93c5fd' },
    { tag: [t.string, t.special(t.string), t.content], color: '#86efac' },
    { tag: t.number, color: '#fdba74' },
    { tag: [t.keyword, t.bool, t.null, t.atom], color: '#d8b4fe' },
    { tag: t.comment, color: '#a3aab8', fontStyle: 'italic' },
    { tag: [t.meta, t.punctuation, t.separator, t.brace, t.squareBracket], color: '#cbd5e1' },
  ]),
}

const CHROME: Record<Theme, ReturnType<typeof EditorView.theme>> = {
  light: EditorView.theme({ '.cm-gutters': { color: '#4b5563' }, '.cm-activeLineGutter': { color: '#111827' } }),
  dark: EditorView.theme(
    {
      '&': { backgroundColor: '#0f172a', color: '#e5e7eb' },
      '.cm-content': { caretColor: '#e5e7eb' },
      '.cm-cursor, .cm-dropCursor': { borderLeftColor: '#e5e7eb' },
      '.cm-gutters': { backgroundColor: '#111a2b', color: '#a3aab8', borderColor: '#2b3442' },
      '.cm-activeLine': { backgroundColor: '#1e293b' },
      '.cm-activeLineGutter': { backgroundColor: '#1e293b', color: '#e5e7eb' },
      '&.cm-focused .cm-selectionBackground, .cm-selectionBackground, .cm-content ::selection': { backgroundColor: '#334155' },
    },
    { dark: true },
  ),
}

const looks = (theme: Theme) => [CHROME[theme], syntaxHighlighting(HIGHLIGHT[theme])]

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
  const theme = useTheme()
  const look = useRef(new Compartment())
  // The types the project may use, read once: built-in, from type packages, from its providers.
  const types = useRef<{ name: string; description: string }[]>([])
  useEffect(() => {
    api<{ resourceTypes: { name: string; description: string }[] }>('GET', '/api/resource-types').then(
      (r) => (types.current = r.resourceTypes),
      () => {},
    )
  }, [])

  useEffect(() => {
    if (!host.current) return
    const completionData = [
      {
        autocomplete: (ctx: { state: EditorState; pos: number }) => {
          const line = ctx.state.doc.lineAt(ctx.pos)
          return typeCompletions(ctx.state.sliceDoc(line.from, ctx.pos), line.from, types.current)
        },
      },
    ]
    const v = new EditorView({
      parent: host.current,
      state: EditorState.create({
        doc: value,
        extensions: [
          basicSetup,
          yaml(),
          lintGutter(),
          // basicSetup's autocompletion asks the language data for sources: this one offers type names after `type:`.
          // The same array (the same source) every time: a source that changes identity is dropped and asked again.
          EditorState.languageData.of(() => completionData),
          EditorView.contentAttributes.of({ 'aria-label': label }),
          look.current.of(looks(theme)),
          EditorView.updateListener.of((u) => u.docChanged && changeRef.current(u.state.doc.toString())),
        ],
      }),
    })
    // The editor scrolls inside its own box: that box must be reachable from the keyboard too.
    v.scrollDOM.tabIndex = 0
    v.scrollDOM.setAttribute('aria-label', `${label} (scrollable)`)
    view.current = v
    return () => v.destroy()
    // the editor owns the text after mount; `value` changes from outside are applied below
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [])

  useEffect(() => {
    view.current?.dispatch({ effects: look.current.reconfigure(looks(theme)) })
  }, [theme])

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
