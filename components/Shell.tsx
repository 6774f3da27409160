'use client'
/**
 * Page frame of every signed-in page: loads the session (redirecting to the
 * login page without one), shows the project, the live connection state and
 * a sign-out button, and hands the session to the page through context.
 */
import Link from 'next/link'
import { useRouter } from 'next/navigation'
import { createContext, useContext, useEffect, useState, type ReactNode } from 'react'
import { loadSession, logout, type SessionInfo } from './api'
import { closeSocket, useConnectionState } from './socket'

const SessionContext = createContext<SessionInfo | null>(null)

export function useSession(): SessionInfo {
  const s = useContext(SessionContext)
  if (!s) throw new Error('useSession outside <Shell>')
  return s
}

function ConnectionBadge() {
  const s = useConnectionState()
  const text = s === 'connected' ? 'live' : s === 'connecting' ? 'connecting…' : 'offline: reconnecting'
  return (
    <span className={`conn conn-${s}`} data-testid="connection" aria-live="polite" title="Socket.IO connection for live updates">
      <span aria-hidden>{s === 'connected' ? '●' : s === 'connecting' ? '◌' : '○'}</span> {text}
    </span>
  )
}

export function Shell({ children }: { children: ReactNode }) {
  const router = useRouter()
  const [session, setSession] = useState<SessionInfo | null>(null)
  const [error, setError] = useState<string | null>(null)

  useEffect(() => {
    loadSession()
      .then((s) => (s ? setSession(s) : router.replace(`/login?next=${encodeURIComponent(location.pathname)}`)))
      .catch((e: Error) => setError(e.message))
  }, [router])

  if (error) return <main className="page"><p role="alert" className="error">{error}</p></main>
  if (!session) return <main className="page"><p>Loading…</p></main>
  return (
    <SessionContext.Provider value={session}>
      <header className="topbar">
        <Link href="/" className="brand">Kiln</Link>
        <nav>
          <Link href="/">Stacks</Link>
          <Link href="/stacks/new">New stack</Link>
        </nav>
        <span className="spacer" />
        <ConnectionBadge />
        <span className="who" data-testid="project">project <strong>{session.project.name}</strong></span>
        <button
          className="link"
          onClick={async () => {
            await logout()
            closeSocket()
            router.replace('/login')
          }}
        >
          Sign out
        </button>
      </header>
      <main className="page">{children}</main>
    </SessionContext.Provider>
  )
}
