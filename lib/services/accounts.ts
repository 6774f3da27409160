/**
 * Projects, API tokens and browser sessions. Tokens are shown once and stored
 * hashed; sessions are random cookies (stored hashed) bound to a token, each
 * with its own CSRF token; revoking a token ends its sessions.
 */
import crypto from 'node:crypto'
import type pg from 'pg'
import { createToken, hashToken, verifyToken, type TokenPrincipal } from '../auth/tokens'
import { endSession, revokeToken } from '../db/queries/revocations'
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from './errors'

export interface Principal extends TokenPrincipal {
  /** `signal`: a wait condition handle's own token, which may only signal that handle (`signalHandle`, its row uuid). */
  via: 'token' | 'session' | 'signal'
  signalHandle?: string
  /** For session principals: the CSRF token state-changing requests must echo. */
  csrfToken: string | null
}

const SESSION_HOURS = 12
const NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$/

export function createAccountService(pool: pg.Pool) {
  return {
    async byToken(secret: string): Promise<Principal | null> {
      const p = await verifyToken(pool, secret)
      return p ? { ...p, via: 'token', csrfToken: null } : null
    },

    async bySession(cookie: string): Promise<Principal | null> {
      if (!cookie || cookie.length > 200) return null
      const { rows } = await pool.query(
        `SELECT t.id, t.name, t.role, t.expires_at, p.id AS project_id, p.name AS project_name, s.csrf_token
           FROM session s JOIN api_token t ON t.id = s.token_id JOIN project p ON p.id = t.project_id
          WHERE s.session_hash = $1 AND s.expires_at > now() AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())`,
        [hashToken(cookie)],
      )
      const r = rows[0]
      return r ? { tokenId: r.id, tokenName: r.name, role: r.role, projectId: r.project_id, projectName: r.project_name, expiresAt: r.expires_at ? new Date(r.expires_at) : null, via: 'session', csrfToken: r.csrf_token } : null
    },

    /** Log in with a token: a new session cookie and its CSRF token. */
    async login(secret: string): Promise<{ cookie: string; csrfToken: string; principal: Principal; expiresAt: Date } | null> {
      const p = await verifyToken(pool, secret)
      if (!p) return null
      const cookie = crypto.randomBytes(32).toString('base64url')
      const csrfToken = crypto.randomBytes(24).toString('base64url')
      const expiresAt = new Date(Date.now() + SESSION_HOURS * 3600_000)
      await pool.query(`INSERT INTO session (token_id, session_hash, csrf_token, expires_at) VALUES ($1, $2, $3, $4)`, [p.tokenId, hashToken(cookie), csrfToken, expiresAt])
      await pool.query(`DELETE FROM session WHERE expires_at < now()`)
      return { cookie, csrfToken, principal: { ...p, via: 'session', csrfToken }, expiresAt }
    },

    /** End the session; a socket it authenticated is closed, whichever web process holds it. */
    async logout(cookie: string): Promise<void> {
      await endSession(pool, hashToken(cookie))
    },

    async listTokens(p: Principal) {
      const { rows } = await pool.query(
        `SELECT id, name, prefix, role, created_at, expires_at, revoked_at, last_used_at FROM api_token WHERE project_id = $1 ORDER BY created_at`,
        [p.projectId],
      )
      return rows.map((r) => ({
        id: String(r.id),
        name: String(r.name),
        prefix: String(r.prefix),
        role: String(r.role),
        createdAt: new Date(r.created_at).toISOString(),
        expiresAt: r.expires_at ? new Date(r.expires_at).toISOString() : null,
        revokedAt: r.revoked_at ? new Date(r.revoked_at).toISOString() : null,
        lastUsedAt: r.last_used_at ? new Date(r.last_used_at).toISOString() : null,
      }))
    },

    async createToken(p: Principal, name: string, expiresInDays: number | null) {
      const expiresAt = expiresInDays === null ? null : new Date(Date.now() + expiresInDays * 86400_000)
      const t = await createToken(pool, p.projectId, name, { role: 'member', expiresAt })
      return { id: t.id, name, secret: t.secret, expiresAt: expiresAt?.toISOString() ?? null }
    },

    /** Revoke a token and end its sessions; sockets they authenticated are closed, whichever web process holds them. */
    async revokeToken(p: Principal, id: string): Promise<void> {
      if (!(await revokeToken(pool, p.projectId, id))) throw new NotFoundError(`token ${id} not found`)
    },

    /** Admins create projects; the first token of the new project is returned once. */
    async createProject(p: Principal, name: string) {
      if (p.role !== 'admin') throw new ForbiddenError('only an admin token can create projects')
      if (!NAME.test(name)) throw new ValidationError('a project name starts with a letter or digit and has at most 63 letters, digits, _ . -')
      const { rows } = await pool.query(`INSERT INTO project (name) VALUES ($1) ON CONFLICT (name) DO NOTHING RETURNING id`, [name])
      if (!rows[0]) throw new ConflictError(`project ${name} already exists`)
      const t = await createToken(pool, rows[0].id, `${name} (first token)`, { role: 'member' })
      return { id: String(rows[0].id), name, token: { id: t.id, secret: t.secret } }
    },
  }
}

export type AccountService = ReturnType<typeof createAccountService>
