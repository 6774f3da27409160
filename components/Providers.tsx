'use client'
/**
 * The project's resource providers (docs/guide/providers.md): the ones it
 * may use (its own and the admin's), each with its types; a form that
 * registers one (Kiln reads its types and answers a generated secret once);
 * refreshing and removing its own.
 */
import { useCallback, useEffect, useState } from 'react'
import { api, ApiError } from './api'
import { ConfirmDialog } from './ConfirmDialog'

interface Provider {
  name: string
  prefix: string
  url: string
  projectId: string | null
  types: { name: string; description?: string }[]
  updatedAt: string
}

export function Providers() {
  const [providers, setProviders] = useState<Provider[] | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [secret, setSecret] = useState<{ name: string; secret: string } | null>(null)
  const [removing, setRemoving] = useState<Provider | null>(null)
  const [form, setForm] = useState({ name: '', url: '', prefix: '', secret: '' })
  const [busy, setBusy] = useState(false)

  const load = useCallback(() => {
    api<{ providers: Provider[] }>('GET', '/api/providers').then((r) => setProviders(r.providers), (e: Error) => setError(e.message))
  }, [])
  useEffect(load, [load])

  const act = async (what: () => Promise<void>) => {
    setBusy(true)
    setError(null)
    try {
      await what()
      load()
    } catch (e) {
      setError(e instanceof ApiError ? e.message : String(e))
    } finally {
      setBusy(false)
    }
  }

  return (
    <section className="providers">
      <h1>Providers</h1>
      <p className="note">
        A provider is an HTTP service that manages resources of its own types, named <code>&lt;prefix&gt;::&lt;type&gt;</code> in this project&apos;s templates.
      </p>
      {error && <p role="alert" className="error" data-testid="providers-error">{error}</p>}
      {secret && (
        <p role="status" className="note" data-testid="provider-secret">
          Provider {secret.name} registered. Its secret, shown once (configure the provider with it): <code>{secret.secret}</code>
        </p>
      )}
      {providers === null ? (
        <p>Loading…</p>
      ) : providers.length === 0 ? (
        <p data-testid="no-providers">No providers yet.</p>
      ) : (
        <table className="plain" data-testid="providers-table">
          <thead>
            <tr><th scope="col">Name</th><th scope="col">Types</th><th scope="col">URL</th><th scope="col"><span className="sr-only">Actions</span></th></tr>
          </thead>
          <tbody>
            {providers.map((p) => (
              <tr key={`${p.projectId ?? 'global'}/${p.name}`} data-provider={p.name}>
                <td>{p.name}{p.projectId === null && <small> (every project)</small>}</td>
                <td>{p.types.map((t) => <code key={t.name} title={t.description}>{`${p.prefix}::${t.name}`} </code>)}</td>
                <td className="url">{p.url}</td>
                <td>
                  {p.projectId !== null && (
                    <span className="actions">
                      <button type="button" disabled={busy} onClick={() => act(() => api('POST', `/api/providers/${encodeURIComponent(p.name)}/refresh`, {}))} aria-label={`refresh the types of ${p.name}`}>Refresh</button>
                      <button type="button" className="danger" disabled={busy} onClick={() => setRemoving(p)} aria-label={`remove ${p.name}…`}>Remove…</button>
                    </span>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}

      <h2>Register a provider</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          void act(async () => {
            const body = { name: form.name.trim(), url: form.url.trim(), prefix: form.prefix.trim(), ...(form.secret ? { secret: form.secret } : {}) }
            const r = await api<{ provider: Provider; secret?: string }>('POST', '/api/providers', body)
            setSecret(r.secret ? { name: r.provider.name, secret: r.secret } : null)
            setForm({ name: '', url: '', prefix: '', secret: '' })
          })
        }}
      >
        <div className="field-row">
          <label>Name <input value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} required aria-label="provider name" placeholder="acme" autoComplete="off" /></label>
          <label>Type prefix <input value={form.prefix} onChange={(e) => setForm({ ...form, prefix: e.target.value })} required aria-label="type prefix" placeholder="Acme" autoComplete="off" /></label>
        </div>
        <label className="field">URL <input value={form.url} onChange={(e) => setForm({ ...form, url: e.target.value })} required aria-label="provider URL" placeholder="https://acme.example/kiln" autoComplete="off" /></label>
        <label className="field">Secret (optional: one is generated) <input type="password" value={form.secret} onChange={(e) => setForm({ ...form, secret: e.target.value })} aria-label="provider secret" autoComplete="new-password" /></label>
        <div className="actions">
          <button type="submit" className="primary" disabled={busy}>{busy ? 'Registering…' : 'Register'}</button>
        </div>
      </form>

      <ConfirmDialog open={removing !== null} label="remove the provider" onClose={() => setRemoving(null)}>
        <p>Remove provider <strong>{removing?.name}</strong>? Its types can no longer be used; it is refused while resources of its types exist.</p>
        <div className="actions">
          <button type="button" data-autofocus onClick={() => setRemoving(null)}>Keep it</button>
          <button
            type="button"
            className="danger"
            onClick={() => {
              const p = removing
              setRemoving(null)
              if (p) void act(() => api('DELETE', `/api/providers/${encodeURIComponent(p.name)}`))
            }}
          >
            Remove the provider
          </button>
        </div>
      </ConfirmDialog>
    </section>
  )
}
