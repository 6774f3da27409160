/**
 * Turning the parsed environment into the options each part takes, in one
 * place, so the web server, the worker and the tests build them alike.
 */
import path from 'node:path'
import type { Env } from './env'
import type { Limits } from './plan/template-check'
import { TARGET_SESSIONS_PER_PROCESS } from './resources/builtin/postgres-capacity'
import type { BuiltinOptions } from './resources/registry'
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
    projectQuotas: {
      connections: e.KILN_PROJECT_CONNECTION_LIMIT,
      databases: e.KILN_PROJECT_MAX_DATABASES,
      snapshots: e.KILN_PROJECT_MAX_SNAPSHOTS,
      bytes: e.KILN_PROJECT_DATABASE_QUOTA_BYTES,
    },
    kilnConnections: kilnConnections(e, targetIsOwnServer(e, databaseUrl)).target,
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

/** Connections of the web server's pool (lib/server/context.ts). */
export const WEB_POOL_SIZE = 20

/**
 * Connections of a worker's pool: at most 8 database calls at once, however many actions run. Actions hold
 * no connection, and more concurrent engine steps only queue inside PostgreSQL on the stack's event-number
 * lock (bench, layered-10000 create: 32.6 s with 20 connections, 20.7 s with 8).
 */
export const workerPoolSize = (e: Env): number => Math.min(8, e.KILN_WORKER_CONCURRENCY + 4)

/** Listening connections per process: a worker's (jobs, wait conditions' signals), the web server's (events, revocations). */
const LISTENERS_PER_PROCESS = 2
/** Short connections while a process starts (migrations, the access check), and room for an operator's session. */
const START_UP_CONNECTIONS = 5

/**
 * The connections Kiln may hold at once: on its own server (DATABASE_URL) and on the target server of
 * Kiln::Postgres::Database (the same one by default). The web server and WORKERS workers each hold a pool,
 * two listening connections and at most TARGET_SESSIONS_PER_PROCESS sessions of that type on the target.
 * Tenants' roles are given only what the target server has left beside this (docs/operations/security.md).
 */
export function kilnConnections(e: Env, targetIsOwn: boolean): { ownServer: number; target: number } {
  const processes = e.WORKERS + 1
  const pools = WEB_POOL_SIZE + e.WORKERS * workerPoolSize(e) + processes * LISTENERS_PER_PROCESS + START_UP_CONNECTIONS
  const sessions = processes * TARGET_SESSIONS_PER_PROCESS
  return { ownServer: pools + (targetIsOwn ? sessions : 0), target: targetIsOwn ? pools + sessions : sessions }
}

/** Whether Kiln::Postgres::Database makes its databases on Kiln's own server (KILN_TARGET_DATABASE_URL unset, or naming it). */
export const targetIsOwnServer = (e: Env, databaseUrl: string): boolean => !e.KILN_TARGET_DATABASE_URL || sameServer(e.KILN_TARGET_DATABASE_URL, databaseUrl)

function sameServer(a: string, b: string): boolean {
  const server = (u: URL) => `${u.hostname}:${u.port || '5432'}`
  return server(new URL(a)) === server(new URL(b))
}

/** What the built-in types take from the installation (Kiln::Exec's allow-list), alike in the web server and the workers. */
export const builtinOptionsFrom = (e: Env): BuiltinOptions => ({ exec: { commands: e.KILN_EXEC_COMMANDS } })
