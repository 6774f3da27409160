/**
 * API tokens: `kiln_<43 base64url chars>` (256 random bits). Only the SHA-256
 * of a token is stored; the secret is shown once, when it is created.
 */
import crypto from 'node:crypto'
import type pg from 'pg'

export const TOKEN_PREFIX = 'kiln_'

export function newTokenSecret(): string {
  return TOKEN_PREFIX + crypto.randomBytes(32).toString('base64url')
}

export function hashToken(secret: string): string {
  return crypto.createHash('sha256').update(secret, 'utf8').digest('hex')
}

export interface TokenPrincipal {
  tokenId: string
  tokenName: string
  projectId: string
  projectName: string
  role: string
  /** When the token stops working by itself (null: never). */
  expiresAt: Date | null
}

/** The principal of a live (not revoked, not expired) token, or null. */
export async function verifyToken(pool: Pick<pg.Pool, 'query'>, secret: string): Promise<TokenPrincipal | null> {
  if (!secret || secret.length > 200) return null
  const { rows } = await pool.query(
    `UPDATE api_token t SET last_used_at = now() FROM project p
      WHERE t.token_hash = $1 AND p.id = t.project_id AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())
      RETURNING t.id, t.name, t.role, t.expires_at, p.id AS project_id, p.name AS project_name`,
    [hashToken(secret)],
  )
  const r = rows[0]
  return r ? { tokenId: r.id, tokenName: r.name, projectId: r.project_id, projectName: r.project_name, role: r.role, expiresAt: r.expires_at ? new Date(r.expires_at) : null } : null
}

export interface CreatedToken {
  id: string
  secret: string
  name: string
  expiresAt: Date | null
}

export async function createToken(pool: Pick<pg.Pool, 'query'>, projectId: string, name: string, opts: { role?: string; expiresAt?: Date | null; secret?: string } = {}): Promise<CreatedToken> {
  const secret = opts.secret ?? newTokenSecret()
  const { rows } = await pool.query(
    `INSERT INTO api_token (project_id, name, token_hash, prefix, role, expires_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
    [projectId, name, hashToken(secret), secret.slice(0, 10), opts.role ?? 'member', opts.expiresAt ?? null],
  )
  return { id: rows[0].id, secret, name, expiresAt: opts.expiresAt ?? null }
}

/**
 * First start: an `admin` project with an admin token. With `fixedSecret`
 * (KILN_ADMIN_TOKEN) that token is ensured to exist; otherwise a token is
 * generated once and returned so the launcher can print it (never again).
 */
export async function bootstrapAdmin(pool: pg.Pool, fixedSecret?: string): Promise<{ projectId: string; createdSecret: string | null }> {
  await pool.query(`INSERT INTO project (name) VALUES ('admin') ON CONFLICT (name) DO NOTHING`)
  const { rows } = await pool.query(`SELECT id FROM project WHERE name = 'admin'`)
  const projectId = String(rows[0].id)
  if (fixedSecret) {
    const found = await pool.query('SELECT 1 FROM api_token WHERE token_hash = $1', [hashToken(fixedSecret)])
    if (!found.rowCount) await createToken(pool, projectId, 'admin (KILN_ADMIN_TOKEN)', { role: 'admin', secret: fixedSecret })
    return { projectId, createdSecret: null }
  }
  const existing = await pool.query(`SELECT 1 FROM api_token WHERE project_id = $1 AND role = 'admin' AND revoked_at IS NULL`, [projectId])
  if (existing.rowCount) return { projectId, createdSecret: null }
  const t = await createToken(pool, projectId, 'admin (first start)', { role: 'admin' })
  return { projectId, createdSecret: t.secret }
}
