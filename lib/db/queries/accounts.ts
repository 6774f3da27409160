/**
 * Projects, API tokens and browser sessions: plain reads and writes, through
 * Prisma Client's typed queries, except the two that authenticate every
 * request (tokenByHash, sessionByHash), which stay one SQL statement each:
 * through Prisma Client the token check took 12–16 ms (median of 500, the
 * find with its project and the last-used update) against 3–4 ms for the one
 * statement, on every API call. (Revoking a token or ending a session also
 * notifies every web process in the same transaction: that stays SQL, in
 * revocations.ts.)
 */
import type { Db } from '../client'

export interface TokenRow {
  tokenId: string
  tokenName: string
  projectId: string
  projectName: string
  role: string
  expiresAt: Date | null
}

/** A live token: not revoked, not expired. */
const live = () => ({ revokedAt: null, OR: [{ expiresAt: null }, { expiresAt: { gt: new Date() } }] })

/** The live token with this hash, its use recorded (last_used_at). One statement: see the top of the file. */
export async function tokenByHash(db: Db, tokenHash: string): Promise<TokenRow | null> {
  const { rows } = await db.pool.query(
    `UPDATE api_token t SET last_used_at = now() FROM project p
      WHERE t.token_hash = $1 AND p.id = t.project_id AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())
      RETURNING t.id, t.name, t.role, t.expires_at, p.id AS project_id, p.name AS project_name`,
    [tokenHash],
  )
  const r = rows[0]
  return r ? { tokenId: r.id, tokenName: r.name, projectId: r.project_id, projectName: r.project_name, role: r.role, expiresAt: r.expires_at ? new Date(r.expires_at) : null } : null
}

export async function insertToken(db: Db, t: { projectId: string; name: string; tokenHash: string; prefix: string; role: string; expiresAt: Date | null }): Promise<string> {
  const row = await db.prisma.apiToken.create({ data: t, select: { id: true } })
  return row.id
}

export async function tokenExists(db: Db, tokenHash: string): Promise<boolean> {
  return (await db.prisma.apiToken.count({ where: { tokenHash } })) > 0
}

export async function liveAdminTokenExists(db: Db, projectId: string): Promise<boolean> {
  return (await db.prisma.apiToken.count({ where: { projectId, role: 'admin', revokedAt: null } })) > 0
}

export async function listTokens(db: Db, projectId: string) {
  return db.prisma.apiToken.findMany({
    where: { projectId },
    orderBy: { createdAt: 'asc' },
    select: { id: true, name: true, prefix: true, role: true, createdAt: true, expiresAt: true, revokedAt: true, lastUsedAt: true },
  })
}

/** The project named `name`, made if it does not exist (safe to race). */
export async function ensureProject(db: Db, name: string): Promise<string> {
  const p = await db.prisma.project.upsert({ where: { name }, create: { name }, update: {}, select: { id: true } })
  return p.id
}

/** A new project, or null when the name is taken. */
export async function insertProject(db: Db, name: string): Promise<string | null> {
  const made = await db.prisma.project.createManyAndReturn({ data: [{ name }], skipDuplicates: true, select: { id: true } })
  return made[0]?.id ?? null
}

export interface SessionRow extends TokenRow {
  csrfToken: string
  /** The session's own expiry. */
  sessionExpiresAt: Date
}

/** A live session (not expired) of a live token. One statement: see the top of the file. */
export async function sessionByHash(db: Db, sessionHash: string): Promise<SessionRow | null> {
  const { rows } = await db.pool.query(
    `SELECT t.id, t.name, t.role, t.expires_at, p.id AS project_id, p.name AS project_name, s.csrf_token, s.expires_at AS session_expires_at
       FROM session s JOIN api_token t ON t.id = s.token_id JOIN project p ON p.id = t.project_id
      WHERE s.session_hash = $1 AND s.expires_at > now() AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())`,
    [sessionHash],
  )
  const r = rows[0]
  if (!r) return null
  return {
    tokenId: r.id, tokenName: r.name, projectId: r.project_id, projectName: r.project_name, role: r.role,
    expiresAt: r.expires_at ? new Date(r.expires_at) : null, csrfToken: r.csrf_token, sessionExpiresAt: new Date(r.session_expires_at),
  }
}

/** A new session; sessions that have expired are removed on the way. */
export async function insertSession(db: Db, s: { tokenId: string; sessionHash: string; csrfToken: string; expiresAt: Date }): Promise<void> {
  await db.prisma.session.create({ data: s })
  await db.prisma.session.deleteMany({ where: { expiresAt: { lt: new Date() } } })
}

/** Is the token still live, and is `stackId` a stack of `projectId`? (A socket's subscribe checks both.) */
export async function subscribeCheck(db: Db, tokenId: string, projectId: string, stackId: string): Promise<{ live: boolean; found: boolean }> {
  const [token, stack] = await Promise.all([
    db.prisma.apiToken.count({ where: { id: tokenId, ...live() } }),
    db.prisma.stack.count({ where: { id: stackId, projectId } }),
  ])
  return { live: token > 0, found: stack > 0 }
}
