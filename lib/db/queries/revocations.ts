/**
 * Ending credentials, and telling every web process. Revoking a token or
 * ending a session sends `NOTIFY kiln_revoked` in the same transaction, so a
 * web process holding a socket authenticated by it closes that socket when the
 * change commits, whichever process made it. `listenRevocations` is the
 * receiving end; since notifications sent while its connection is down are
 * lost, it reports every (re)connection, and its user then re-checks what it
 * holds (`liveCredentials`).
 */
import pg from 'pg'
import type { Logger } from '../../logger'
import { withTransaction } from '../client'

export const REVOCATION_CHANNEL = 'kiln_revoked'

/** A token revoked (its sessions end with it), or one session ended (logout). */
export type Revocation = { tokenId: string } | { sessionHash: string }

/** Revoke a token of `projectId` and end its sessions; false when the project has no such token. */
export async function revokeToken(pool: pg.Pool, projectId: string, tokenId: string): Promise<boolean> {
  return withTransaction(pool, async (client) => {
    const { rowCount } = await client.query(`UPDATE api_token SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 AND project_id = $2`, [tokenId, projectId])
    if (!rowCount) return false
    await client.query('DELETE FROM session WHERE token_id = $1', [tokenId])
    await client.query('SELECT pg_notify($1, $2)', [REVOCATION_CHANNEL, JSON.stringify({ tokenId } satisfies Revocation)])
    return true
  })
}

/** End one session (logout). One statement: the notification goes only if a session was deleted. */
export async function endSession(pool: Pick<pg.Pool, 'query'>, sessionHash: string): Promise<void> {
  await pool.query(`WITH gone AS (DELETE FROM session WHERE session_hash = $1 RETURNING 1) SELECT pg_notify($2, $3) FROM gone`, [
    sessionHash,
    REVOCATION_CHANNEL,
    JSON.stringify({ sessionHash } satisfies Revocation),
  ])
}

/** Of the given tokens and sessions, the ones still live (not revoked, not expired, session not ended). */
export async function liveCredentials(pool: Pick<pg.Pool, 'query'>, tokenIds: string[], sessionHashes: string[]): Promise<{ tokens: Set<string>; sessions: Set<string> }> {
  const { rows } = await pool.query(
    `SELECT 'token' AS kind, id::text AS key FROM api_token WHERE id = ANY($1::uuid[]) AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
     UNION ALL
     SELECT 'session', s.session_hash FROM session s JOIN api_token t ON t.id = s.token_id
      WHERE s.session_hash = ANY($2::text[]) AND s.expires_at > now() AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())`,
    [tokenIds, sessionHashes],
  )
  const tokens = new Set<string>()
  const sessions = new Set<string>()
  for (const r of rows) (r.kind === 'token' ? tokens : sessions).add(String(r.key))
  return { tokens, sessions }
}

function parse(payload: string | undefined): Revocation | null {
  try {
    const v = JSON.parse(payload ?? '') as Record<string, unknown>
    if (typeof v.tokenId === 'string') return { tokenId: v.tokenId }
    if (typeof v.sessionHash === 'string') return { sessionHash: v.sessionHash }
  } catch {
    /* not ours */
  }
  return null
}

/**
 * LISTEN on a connection of its own; reconnects with back-off when the
 * connection is lost. `onListening` runs after every successful LISTEN,
 * the first included: whatever was revoked before it is not announced.
 */
export function listenRevocations(opts: { url: string; log: Logger; onRevoked(r: Revocation): void; onListening(): void }): { close(): Promise<void> } {
  let client: pg.Client | null = null
  let closed = false
  let backoff = 0

  async function connect(): Promise<void> {
    const c = new pg.Client({ connectionString: opts.url, application_name: 'kiln-web-revocations' })
    let retried = false
    const retry = () => {
      if (closed || retried) return
      retried = true
      if (client === c) client = null
      c.end().catch(() => {})
      const delay = Math.min(5000, 100 * 2 ** backoff++)
      opts.log.warn(`revocation listener: connection lost; reconnecting in ${delay} ms`)
      // Timer reason: back-off before reconnecting to a database that went away.
      setTimeout(() => void connect(), delay).unref()
    }
    c.on('notification', (msg) => {
      if (msg.channel !== REVOCATION_CHANNEL) return
      const r = parse(msg.payload)
      if (r) opts.onRevoked(r)
    })
    c.on('error', retry)
    c.on('end', retry)
    try {
      await c.connect()
      await c.query(`LISTEN ${REVOCATION_CHANNEL}`)
    } catch (err) {
      opts.log.warn(`revocation listener: ${(err as Error).message}`)
      return retry()
    }
    if (closed) {
      await c.end().catch(() => {})
      return
    }
    client = c
    backoff = 0
    opts.onListening()
  }

  void connect()
  return {
    async close() {
      closed = true
      const c = client
      client = null
      await c?.end().catch(() => {})
    },
  }
}
