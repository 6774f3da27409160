/**
 * Authenticating a Socket.IO connection: an API token in the handshake
 * (`auth: { token }`), or the browser's session cookie. Sessions are looked
 * up here too so that sockets and HTTP requests agree on who is who.
 */
import { hashToken, verifyToken } from '../auth/tokens'
import type { Db } from '../db/client'
import { sessionByHash } from '../db/queries/accounts'

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
  db: Db,
  handshake: { auth?: Record<string, unknown>; headers: Record<string, string | string[] | undefined> },
): Promise<SocketPrincipal | null> {
  const token = typeof handshake.auth?.token === 'string' ? handshake.auth.token : null
  if (token) {
    const p = await verifyToken(db, token)
    return p ? { projectId: p.projectId, tokenId: p.tokenId, name: p.tokenName, sessionHash: null, expiresAt: p.expiresAt } : null
  }
  const cookie = cookieValue(handshake.headers.cookie as string | undefined, SESSION_COOKIE)
  if (!cookie) return null
  // A cookie rides along with any page's request: a socket authenticated by it must come
  // from Kiln's own pages (cross-site WebSocket hijacking), like the CSRF check on HTTP writes.
  if (!sameOrigin(handshake.headers)) return null
  const sessionHash = hashToken(cookie)
  const r = await sessionByHash(db, sessionHash)
  // The socket lives as long as the shorter of the session and its token.
  const expiresAt = r ? (r.expiresAt && r.expiresAt < r.sessionExpiresAt ? r.expiresAt : r.sessionExpiresAt) : null
  return r ? { projectId: r.projectId, tokenId: r.tokenId, name: r.tokenName, sessionHash, expiresAt } : null
}
