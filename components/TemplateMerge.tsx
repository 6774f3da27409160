'use client'
/**
 * The edited template beside another version (the deployed one, or the one
 * someone else submitted meanwhile), with CodeMirror's merge view
 * (@codemirror/merge): changed chunks highlighted, unchanged stretches
 * folded, and an arrow per chunk that copies the other version's text into
 * the edit (how an edit is rebased). The left side is read-only; the right
 * side is the edit itself and reports every change.
 */
import { yaml } from '@codemirror/lang-yaml'
import { MergeView } from '@codemirror/merge'
import { EditorState } from '@codemirror/state'
import { EditorView } from '@codemirror/view'
import { basicSetup } from 'codemirror'
import { useEffect, useRef } from 'react'

export function TemplateMerge({ other, edited, onChange, otherLabel, label = 'your edit' }: { other: string; edited: string; onChange: (v: string) => void; otherLabel: string; label?: string }) {
  const host = useRef<HTMLDivElement>(null)
  const view = useRef<MergeView | null>(null)
  const changeRef = useRef(onChange)
  changeRef.current = onChange

  useEffect(() => {
    if (!host.current) return
    const v = new MergeView({
      a: { doc: other, extensions: [basicSetup, yaml(), EditorState.readOnly.of(true), EditorView.editable.of(false), EditorView.contentAttributes.of({ 'aria-label': otherLabel })] },
      b: {
        doc: edited,
        extensions: [basicSetup, yaml(), EditorView.contentAttributes.of({ 'aria-label': label }), EditorView.updateListener.of((u) => u.docChanged && changeRef.current(u.state.doc.toString()))],
      },
      parent: host.current,
      revertControls: 'a-to-b',
      collapseUnchanged: { margin: 3, minSize: 6 },
    })
    view.current = v
    return () => v.destroy()
    // Built once per `other`; the edit's later changes from outside are applied below.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [other])

  useEffect(() => {
    const b = view.current?.b
    if (b && b.state.doc.toString() !== edited) b.dispatch({ changes: { from: 0, to: b.state.doc.length, insert: edited } })
  }, [edited])

  return (
    <div className="merge" data-testid="merge-view">
      <div className="merge-labels"><span>{otherLabel}</span><span>{label}</span></div>
      <div ref={host} className="merge-host" />
    </div>
  )
}
