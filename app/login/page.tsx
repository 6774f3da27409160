'use client'
import { useRouter } from 'next/navigation'
import { useState } from 'react'
import { ApiError, login } from '../../components/api'

export default function LoginPage() {
  const router = useRouter()
  const [token, setToken] = useState('')
  const [error, setError] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)
  return (
    <main className="login">
      <h1>Kiln</h1>
      <p>Sign in with an API token.</p>
      <form
        onSubmit={async (e) => {
          e.preventDefault()
          setBusy(true)
          setError(null)
          try {
            await login(token.trim())
            const next = new URLSearchParams(location.search).get('next')
            router.replace(next && next.startsWith('/') && !next.startsWith('//') ? next : '/')
          } catch (err) {
            setError(err instanceof ApiError && err.status === 401 ? 'That token is unknown, revoked or expired.' : (err as Error).message)
          } finally {
            setBusy(false)
          }
        }}
      >
        <label htmlFor="token">API token</label>
        <input id="token" name="token" type="password" autoComplete="current-password" value={token} onChange={(e) => setToken(e.target.value)} required autoFocus aria-describedby="token-hint" />
        <p id="token-hint" className="hint">
          The first time Kiln starts, <code>npm start</code> prints an admin token in its terminal output, under “Log in with this admin token”.
          Lost it? Set <code>KILN_ADMIN_TOKEN</code> before starting, or ask an admin for a token of your project.
        </p>
        <button type="submit" disabled={busy || !token.trim()}>{busy ? 'Signing in…' : 'Sign in'}</button>
        {error && <p role="alert" className="error">{error}</p>}
      </form>
    </main>
  )
}
