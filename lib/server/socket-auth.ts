/**
 * Authenticating a Socket.IO connection: an API token in the handshake
 * (`auth: { token }`), or the browser's session cookie. Sessions are looked
 * up here too so that sockets and HTTP requests agree on who is who.
 */
import type pg from 'pg'
import { hashToken, verifyToken } from '../auth/tokens'

export interface SocketPrincipal {
  projectId: string
  tokenId: string
  name: string
  /** The session that authenticated the socket (its cookie's hash); null for a token. */
  sessionHash: string | null
  /** When the credential stops working by itself (the token's or the session's expiry, whichever is first). */
  expiresAt: Date | null
}

export const SESSION_COOKIE = 'kiln_session'

function cookieValue(header: string | undefined, name: string): string | null {
  if (!header) return null
  for (const part of header.split(';')) {
    const [k, ...v] = part.trim().split('=')
    if (k === name) return decodeURIComponent(v.join('='))
  }
  return null
}

function sameOrigin(headers: Record<string, string | string[] | undefined>): boolean {
  const origin = headers.origin
  if (origin === undefined) return true // not a browser (browsers always send Origin on WebSocket and CORS requests)
  if (typeof origin !== 'string') return false
  try {
    return new URL(origin).host === headers.host
  } catch {
    return false
  }
}

export async function authenticateSocket(
  pool: Pick<pg.Pool, 'query'>,
  handshake: { auth?: Record<string, unknown>; headers: Record<string, string | string[] | undefined> },
): Promise<SocketPrincipal | null> {
  const token = typeof handshake.auth?.token === 'string' ? handshake.auth.token : null
  if (token) {
    const p = await verifyToken(pool, token)
    return p ? { projectId: p.projectId, tokenId: p.tokenId, name: p.tokenName, sessionHash: null, expiresAt: p.expiresAt } : null
  }
  const cookie = cookieValue(handshake.headers.cookie as string | undefined, SESSION_COOKIE)
  if (!cookie) return null
  // A cookie rides along with any page's request: a socket authenticated by it must come
  // from Kiln's own pages (cross-site WebSocket hijacking), like the CSRF check on HTTP writes.
  if (!sameOrigin(handshake.headers)) return null
  const sessionHash = hashToken(cookie)
  const { rows } = await pool.query(
    `SELECT t.id, t.name, t.project_id, least(s.expires_at, t.expires_at) AS expires_at FROM session s JOIN api_token t ON t.id = s.token_id
      WHERE s.session_hash = $1 AND s.expires_at > now() AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())`,
    [sessionHash],
  )
  const r = rows[0]
  return r ? { projectId: r.project_id, tokenId: r.id, name: r.name, sessionHash, expiresAt: r.expires_at ? new Date(r.expires_at) : null } : null
}
