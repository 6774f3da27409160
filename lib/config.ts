/**
 * Turning the parsed environment into the options each part takes, in one
 * place, so the web server, the worker and the tests build them alike.
 */
import path from 'node:path'
import type { Env } from './env'
import type { Limits } from './services/templates'
import type { ResourceTypeConfig } from './resources/types'

export function limitsFrom(e: Env): Limits {
  return { maxTemplateBytes: e.KILN_MAX_TEMPLATE_BYTES, maxResourcesPerStack: e.KILN_MAX_RESOURCES_PER_STACK }
}

export function typeConfigFrom(e: Env, databaseUrl: string): ResourceTypeConfig {
  return {
    workspaceDir: path.resolve(e.KILN_WORKSPACE_DIR ?? path.join(e.KILN_DATA_DIR, 'workspace')),
    workspaceQuotaBytes: e.KILN_WORKSPACE_QUOTA_BYTES,
    targetDatabaseUrl: e.KILN_TARGET_DATABASE_URL ?? databaseUrl,
    tenantConnectionLimit: e.KILN_TENANT_CONNECTION_LIMIT,
    // Workers do not bind the web server's port: its configured value names it.
    publicUrl: publicUrlFrom(e, e.PORT),
  }
}

/**
 * The URL clients reach Kiln at: KILN_PUBLIC_URL, or http://HOST:port with the
 * port actually bound (PORT=0 picks one) and a wildcard HOST read as loopback.
 */
export function publicUrlFrom(e: Env, boundPort: number): string {
  if (e.KILN_PUBLIC_URL) return e.KILN_PUBLIC_URL
  const host = e.HOST === '0.0.0.0' ? '127.0.0.1' : e.HOST === '::' ? '::1' : e.HOST
  return `http://${host.includes(':') ? `[${host}]` : host}:${boundPort}`
}
