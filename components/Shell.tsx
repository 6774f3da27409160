'use client'
/**
 * Page frame of every signed-in page: the project, the live connection
 * state, the theme toggle and a sign-out button. The page itself starts at
 * once, beside the session check (the server already sent visitors without a
 * session cookie to the login form); a session found expired or revoked
 * sends the visitor there too.
 */
import Link from 'next/link'
import { useRouter } from 'next/navigation'
import { useEffect, useState, type ReactNode } from 'react'
import { loadSession, logout, type SessionInfo } from './api'
import { closeSocket, useConnectionState } from './socket'
import { applyTheme, chosenTheme, useTheme } from './theme'


function ConnectionBadge() {
  const s = useConnectionState()
  const text = s === 'connected' ? 'live' : s === 'connecting' ? 'connecting…' : 'offline: reconnecting'
  return (
    <span className={`conn conn-${s}`} data-testid="connection" aria-live="polite" title="Socket.IO connection for live updates">
      <span aria-hidden>{s === 'connected' ? '●' : s === 'connecting' ? '◌' : '○'}</span> {text}
    </span>
  )
}

/** Light or dark; the first choice follows the system, a click fixes the other one. */
function ThemeToggle() {
  const theme = useTheme()
  useEffect(() => applyTheme(chosenTheme()), [])
  const next = theme === 'dark' ? 'light' : 'dark'
  return (
    <button type="button" className="icon" onClick={() => applyTheme(next)} aria-label={`switch to the ${next} theme`} title={`switch to the ${next} theme`}>
      {theme === 'dark' ? '☀' : '☾'}
    </button>
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
  return (
    <>
      <header className="topbar">
        <Link href="/" className="brand">Kiln</Link>
        <nav>
          <Link href="/">Stacks</Link>
          <Link href="/stacks/new">New stack</Link>
          <Link href="/providers">Providers</Link>
        </nav>
        <span className="spacer" />
        <ConnectionBadge />
        <ThemeToggle />
        <span className="who" data-testid="project">project <strong>{session?.project.name ?? '…'}</strong></span>
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
    </>
  )
}
