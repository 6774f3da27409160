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
      <p>Sign in with an API token. <code>npm start</code> prints the admin token on first start; <code>POST /api/tokens</code> makes more.</p>
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
        <input id="token" name="token" type="password" autoComplete="current-password" value={token} onChange={(e) => setToken(e.target.value)} required />
        <button type="submit" disabled={busy || !token.trim()}>{busy ? 'Signing in…' : 'Sign in'}</button>
        {error && <p role="alert" className="error">{error}</p>}
      </form>
    </main>
  )
}
