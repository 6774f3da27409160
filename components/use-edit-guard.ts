'use client'
/**
 * The stack page's edit, kept from overwriting anyone by accident.
 *
 * - The editor's text is written against a version of the stack (`base`, the
 *   template it was loaded from, or the one this page last submitted); every
 *   update names it (`expect`). If the stack moved to another template since
 *   (someone else's update, a rollback), Kiln refuses with 409 and what
 *   changed meanwhile: the page shows it (`conflict`) and lets the user
 *   rebase the edit on the current template or supersede knowingly.
 * - The page learns of a new template under the open editor (a new traversal
 *   arrives on the live stream and the stack is read again): `deployed` is
 *   that version while it differs from `base`.
 * - An unchanged submission is answered "no changes" and starts nothing;
 *   `force()` sends it anyway.
 */
import { useCallback, useEffect, useRef, useState } from 'react'
import type { TraversalSummary } from '../lib/db/queries/versions'
import type { TemplateVersion, VersionDiff } from '../lib/services/versions'
import { api, ApiError } from './api'

export interface UpdateBody {
  template: string
  parameters?: Record<string, unknown>
  /** observe every resource and bring back what drifted (never "no changes") */
  converge?: true
  /** abort the running operation's in-flight actions on the resources whose targets change */
  preempt?: true
}

export interface UpdateAnswer {
  traversalId: string | null
  superseded: string | null
  templateId?: string
  noChanges?: true
}

export interface Conflict {
  message: string
  current: { templateId: string | null; traversalId: string | null; action: string; status: string }
  since: TraversalSummary[]
  diff: VersionDiff | null
}

export interface EditGuard {
  /** The version the edit is written against. */
  base: TemplateVersion | null
  /** The stack's version now, while it differs from `base`. */
  deployed: TemplateVersion | null
  conflict: Conflict | null
  /** The last submission was unchanged: nothing started. */
  unchanged: boolean
  /** Send an update written against `base`; null when it was refused (a conflict) or unchanged: the guard shows why. */
  update(body: UpdateBody): Promise<UpdateAnswer | null>
  /** Keep the edit, now written against the stack's current version. */
  rebase(): Promise<void>
  /** Replace the edit with the stack's current template. */
  takeDeployed(): Promise<void>
  /** Send the refused submission again, naming the current version: supersede knowingly. */
  supersede(): Promise<UpdateAnswer | null>
  /** Send the unchanged submission anyway. */
  force(): Promise<UpdateAnswer | null>
  dismiss(): void
}

/** `stack`: the page's live copy of `GET /api/stacks/{id}` (its `templateId` is the stack's version now). */
export function useEditGuard(stackId: string, stack: object | null, setSource: (update: (s: string | null) => string) => void, onStarted: (r: UpdateAnswer) => void): EditGuard {
  const [base, setBase] = useState<TemplateVersion | null>(null)
  const [deployed, setDeployed] = useState<TemplateVersion | null>(null)
  const [conflict, setConflict] = useState<Conflict | null>(null)
  const [unchanged, setUnchanged] = useState(false)
  const last = useRef<UpdateBody | null>(null)
  const current = () => api<TemplateVersion>('GET', `/api/stacks/${stackId}/traversals/current/template`)

  // The version the editor starts from.
  useEffect(() => {
    current()
      .then((v) => {
        setBase(v)
        setSource((s) => s ?? v.source)
      })
      .catch(() => setSource((s) => s ?? ''))
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [stackId])

  // A template other than the edit's base under the open editor: read it, to say so and to compare.
  const now = stack && 'templateId' in stack && typeof stack.templateId === 'string' ? stack.templateId : null
  useEffect(() => {
    if (!base || !now || now === base.templateId) {
      setDeployed(null)
      return
    }
    let live = true
    current().then((v) => live && setDeployed(v.templateId === base.templateId ? null : v)).catch(() => {})
    return () => {
      live = false
    }
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [now, base?.templateId])

  const send = useCallback(
    async (body: UpdateBody, opts: { expect?: string; force?: boolean } = {}): Promise<UpdateAnswer | null> => {
      last.current = body
      const expect = opts.expect ?? base?.templateId
      try {
        const r = await api<UpdateAnswer>('PUT', `/api/stacks/${stackId}`, { ...body, ...(expect ? { expect } : {}), ...(opts.force ? { force: true } : {}) })
        setConflict(null)
        if (r.noChanges) {
          setUnchanged(true)
          return null
        }
        setUnchanged(false)
        // The page's own update: its text is now what the stack converges to.
        if (r.templateId) setBase({ templateId: r.templateId, traversalId: r.traversalId, source: body.template, environment: {}, parameters: body.parameters ?? {} })
        return r
      } catch (err) {
        if (err instanceof ApiError && err.status === 409 && err.details.current) {
          setUnchanged(false)
          setConflict({ message: err.message, current: err.details.current as Conflict['current'], since: (err.details.since as TraversalSummary[]) ?? [], diff: (err.details.diff as VersionDiff | null) ?? null })
          return null
        }
        throw err
      }
    },
    [stackId, base?.templateId],
  )

  const rebase = async () => {
    const v = deployed ?? (await current())
    setBase(v)
    setDeployed(null)
    setConflict(null)
  }

  return {
    base,
    deployed,
    conflict,
    unchanged,
    update: (body) => send(body),
    rebase,
    async takeDeployed() {
      const v = deployed ?? (await current())
      setSource(() => v.source)
      setBase(v)
      setDeployed(null)
      setConflict(null)
    },
    async supersede() {
      const to = conflict?.current.templateId
      if (!last.current || !to) return null
      const r = await send(last.current, { expect: to })
      if (r) onStarted(r)
      return r
    },
    async force() {
      if (!last.current) return null
      const r = await send(last.current, { force: true })
      if (r) onStarted(r)
      return r
    },
    dismiss() {
      setConflict(null)
      setUnchanged(false)
    },
  }
}
