'use client'
/** A form generated from the template's `parameters` section. Empty fields fall back to the defaults. */
import type { TemplateParameter } from './use-validation'

export function ParametersForm({ parameters, values, onChange }: { parameters: TemplateParameter[]; values: Record<string, string>; onChange: (v: Record<string, string>) => void }) {
  if (parameters.length === 0) return null
  return (
    <fieldset className="params">
      <legend>Parameters</legend>
      {parameters.map((p) => (
        <label key={p.name} className="param">
          <span>
            {p.label || p.name} <small>({p.type})</small>
          </span>
          {p.type === 'boolean' ? (
            <select value={values[p.name] ?? ''} onChange={(e) => onChange({ ...values, [p.name]: e.target.value })} aria-label={`parameter ${p.name}`}>
              <option value="">default{p.default !== undefined ? ` (${String(p.default)})` : ''}</option>
              <option value="true">true</option>
              <option value="false">false</option>
            </select>
          ) : (
            <input
              type={p.hidden ? 'password' : 'text'}
              aria-label={`parameter ${p.name}`}
              placeholder={p.default !== undefined && p.default !== null ? `default: ${typeof p.default === 'string' ? p.default : JSON.stringify(p.default)}` : 'required'}
              value={values[p.name] ?? ''}
              onChange={(e) => onChange({ ...values, [p.name]: e.target.value })}
            />
          )}
          {p.description && <small className="hint">{p.description}</small>}
        </label>
      ))}
    </fieldset>
  )
}

/** Only the fields the user filled in are sent; the rest keep their defaults (or current values on update). */
export function parameterValues(values: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).filter(([, v]) => v !== ''))
}
