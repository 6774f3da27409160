/**
 * API tokens: `kiln_<43 base64url chars>` (256 random bits). Only the SHA-256
 * of a token is stored; the secret is shown once, when it is created.
 */
import crypto from 'node:crypto'
import type { Db } from '../db/client'
import { ensureProject, insertToken, liveAdminTokenExists, tokenByHash, tokenExists, type TokenRow } from '../db/queries/accounts'

export const TOKEN_PREFIX = 'kiln_'

export function newTokenSecret(): string {
  return TOKEN_PREFIX + crypto.randomBytes(32).toString('base64url')
}

export function hashToken(secret: string): string {
  return crypto.createHash('sha256').update(secret, 'utf8').digest('hex')
}

/** Who a live token belongs to (its project, its role) and when it stops working by itself (null: never). */
export type TokenPrincipal = TokenRow

/** The principal of a live (not revoked, not expired) token, or null. */
export async function verifyToken(db: Db, secret: string): Promise<TokenPrincipal | null> {
  if (!secret || secret.length > 200) return null
  return tokenByHash(db, hashToken(secret))
}

export interface CreatedToken {
  id: string
  secret: string
  name: string
  expiresAt: Date | null
}

export async function createToken(db: Db, projectId: string, name: string, opts: { role?: string; expiresAt?: Date | null; secret?: string } = {}): Promise<CreatedToken> {
  const secret = opts.secret ?? newTokenSecret()
  const id = await insertToken(db, { projectId, name, tokenHash: hashToken(secret), prefix: secret.slice(0, 10), role: opts.role ?? 'member', expiresAt: opts.expiresAt ?? null })
  return { id, secret, name, expiresAt: opts.expiresAt ?? null }
}

/**
 * First start: an `admin` project with an admin token. With `fixedSecret`
 * (KILN_ADMIN_TOKEN) that token is ensured to exist; otherwise a token is
 * generated once and returned so the launcher can print it (never again).
 */
export async function bootstrapAdmin(db: Db, fixedSecret?: string): Promise<{ projectId: string; createdSecret: string | null }> {
  const projectId = await ensureProject(db, 'admin')
  if (fixedSecret) {
    if (!(await tokenExists(db, hashToken(fixedSecret)))) await createToken(db, projectId, 'admin (KILN_ADMIN_TOKEN)', { role: 'admin', secret: fixedSecret })
    return { projectId, createdSecret: null }
  }
  if (await liveAdminTokenExists(db, projectId)) return { projectId, createdSecret: null }
  const t = await createToken(db, projectId, 'admin (first start)', { role: 'admin' })
  return { projectId, createdSecret: t.secret }
}
