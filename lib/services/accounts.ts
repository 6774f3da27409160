/**
 * Projects, API tokens and browser sessions. Tokens are shown once and stored
 * hashed; sessions are random cookies (stored hashed) bound to a token, each
 * with its own CSRF token; revoking a token ends its sessions.
 */
import crypto from 'node:crypto'
import type { Db } from '../db/client'
import { insertProject, insertSession, listTokens, sessionByHash } from '../db/queries/accounts'
import { createToken, hashToken, verifyToken, type TokenPrincipal } from '../auth/tokens'
import { endSession, revokeToken } from '../db/queries/revocations'
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../plan/errors'

export interface Principal extends TokenPrincipal {
  /** `signal`: a wait condition handle's own token, which may only signal that handle (`signalHandle`, its row uuid). */
  via: 'token' | 'session' | 'signal'
  signalHandle?: string
  /** For session principals: the CSRF token state-changing requests must echo. */
  csrfToken: string | null
}

const SESSION_HOURS = 12
const NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$/

export function createAccountService(db: Db) {
  return {
    async byToken(secret: string): Promise<Principal | null> {
      const p = await verifyToken(db, secret)
      return p ? { ...p, via: 'token', csrfToken: null } : null
    },

    async bySession(cookie: string): Promise<Principal | null> {
      if (!cookie || cookie.length > 200) return null
      const r = await sessionByHash(db, hashToken(cookie))
      return r ? { tokenId: r.tokenId, tokenName: r.tokenName, role: r.role, projectId: r.projectId, projectName: r.projectName, expiresAt: r.expiresAt, via: 'session', csrfToken: r.csrfToken } : null
    },

    /** Log in with a token: a new session cookie and its CSRF token. */
    async login(secret: string): Promise<{ cookie: string; csrfToken: string; principal: Principal; expiresAt: Date } | null> {
      const p = await verifyToken(db, secret)
      if (!p) return null
      const cookie = crypto.randomBytes(32).toString('base64url')
      const csrfToken = crypto.randomBytes(24).toString('base64url')
      const expiresAt = new Date(Date.now() + SESSION_HOURS * 3600_000)
      await insertSession(db, { tokenId: p.tokenId, sessionHash: hashToken(cookie), csrfToken, expiresAt })
      return { cookie, csrfToken, principal: { ...p, via: 'session', csrfToken }, expiresAt }
    },

    /** End the session; a socket it authenticated is closed, whichever web process holds it. */
    async logout(cookie: string): Promise<void> {
      await endSession(db.pool, hashToken(cookie))
    },

    async listTokens(p: Principal) {
      return (await listTokens(db, p.projectId)).map((r) => ({
        id: r.id,
        name: r.name,
        prefix: r.prefix,
        role: r.role,
        createdAt: r.createdAt.toISOString(),
        expiresAt: r.expiresAt?.toISOString() ?? null,
        revokedAt: r.revokedAt?.toISOString() ?? null,
        lastUsedAt: r.lastUsedAt?.toISOString() ?? null,
      }))
    },

    async createToken(p: Principal, name: string, expiresInDays: number | null) {
      const expiresAt = expiresInDays === null ? null : new Date(Date.now() + expiresInDays * 86400_000)
      const t = await createToken(db, p.projectId, name, { role: 'member', expiresAt })
      return { id: t.id, name, secret: t.secret, expiresAt: expiresAt?.toISOString() ?? null }
    },

    /** Revoke a token and end its sessions; sockets they authenticated are closed, whichever web process holds them. */
    async revokeToken(p: Principal, id: string): Promise<void> {
      if (!(await revokeToken(db.pool, p.projectId, id))) throw new NotFoundError(`token ${id} not found`)
    },

    /** Admins create projects; the first token of the new project is returned once. */
    async createProject(p: Principal, name: string) {
      if (p.role !== 'admin') throw new ForbiddenError('only an admin token can create projects')
      if (!NAME.test(name)) throw new ValidationError('a project name starts with a letter or digit and has at most 63 letters, digits, _ . -')
      const id = await insertProject(db, name)
      if (!id) throw new ConflictError(`project ${name} already exists`)
      const t = await createToken(db, id, `${name} (first token)`, { role: 'member' })
      return { id, name, token: { id: t.id, secret: t.secret } }
    },
  }
}

export type AccountService = ReturnType<typeof createAccountService>
