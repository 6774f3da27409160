'use client'
/**
 * Validates the editor's text against the server as the user types (debounced
 * 400 ms; a newer request wins), giving the issues to draw inline and the
 * template's parameters for the form. A stack's stored template is not sent
 * back for validation when the page opens (it was valid when submitted, and a
 * big one costs the server a full check): `skip` holds validation until the
 * text is edited.
 */
import { useEffect, useRef, useState } from 'react'
import { api, ApiError, type ApiIssue } from './api'

export interface TemplateParameter {
  name: string
  type: string
  label: string | null
  description: string
  default?: unknown
  hidden: boolean
  constraints?: unknown[]
}

export interface Validation {
  pending: boolean
  valid: boolean | null
  issues: ApiIssue[]
  message: string | null
  parameters: TemplateParameter[]
  resources: { name: string; type: string }[]
}

export function useValidation(template: string, opts: { skip?: boolean; parameters?: TemplateParameter[] } = {}): Validation {
  const [v, setV] = useState<Validation>({ pending: false, valid: null, issues: [], message: null, parameters: opts.parameters ?? [], resources: [] })
  const seq = useRef(0)
  useEffect(() => {
    if (opts.skip) {
      seq.current++
      setV((p) => ({ ...p, pending: false, valid: null, issues: [], message: null, parameters: opts.parameters ?? p.parameters }))
      return
    }
    if (!template.trim()) {
      setV({ pending: false, valid: null, issues: [], message: null, parameters: [], resources: [] })
      return
    }
    const mine = ++seq.current
    setV((p) => ({ ...p, pending: true }))
    const t = setTimeout(async () => {
      try {
        const r = await api<{ parameters: TemplateParameter[]; resources: { name: string; type: string }[] }>('POST', '/api/templates/validate', { template })
        if (mine === seq.current) setV({ pending: false, valid: true, issues: [], message: null, parameters: r.parameters, resources: r.resources })
      } catch (err) {
        if (mine !== seq.current) return
        if (err instanceof ApiError && err.status < 500 && err.status !== 401)
          setV((p) => ({ ...p, pending: false, valid: false, issues: err.issues, message: err.message }))
        else setV((p) => ({ ...p, pending: false, valid: null, message: (err as Error).message }))
      }
    }, 400)
    return () => clearTimeout(t)
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [template, opts.skip])
  return v
}

/** The parameters section of a parsed template, as the form wants it (before any validation ran). */
export function parametersOf(template: Record<string, unknown> | null | undefined): TemplateParameter[] {
  const params = (template?.parameters ?? {}) as Record<string, Record<string, unknown> | null>
  return Object.entries(params).map(([name, p]) => ({
    name,
    type: typeof p?.type === 'string' ? p.type : 'string',
    label: typeof p?.label === 'string' ? p.label : null,
    description: typeof p?.description === 'string' ? p.description : '',
    default: p?.hidden === true || p?.hidden === 'true' ? undefined : p?.default,
    hidden: p?.hidden === true || p?.hidden === 'true',
    constraints: Array.isArray(p?.constraints) ? p.constraints : [],
  }))
}
