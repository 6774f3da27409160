/**
 * Kiln's API over real HTTP for tests: the same `createApi` the web server
 * mounts, on a loopback port, against a TestCluster's database (whose worker
 * processes run the traversals), with Socket.IO attached as in server.ts. Two projects, each with a token, for
 * isolation tests; project A's token is an admin token.
 */
import crypto from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createApi } from '../../lib/api'
import type { ApiDeps } from '../../lib/api/deps'
import { failedAttemptLimit } from '../../lib/auth/failed-attempts'
import { projectRateLimit } from '../../lib/api/project-rate'
import type { Db } from '../../lib/db/client'
import { toNodeHandler } from '../../lib/api/node-adapter'
import { createToken } from '../../lib/auth/tokens'
import { createLogger } from '../../lib/logger'
import { builtinTypes, createRegistry, typeCatalog, withProviders } from '../../lib/resources/registry'
import { ProviderTypes } from '../../lib/resources/provider/provider-types'
import { providerSource } from '../../lib/db/queries/providers'
import { createProviderService } from '../../lib/services/providers'
import { createAccountService } from '../../lib/services/accounts'
import { createReadService } from '../../lib/services/reads'
import { createPlanService } from '../../lib/services/plans'
import { createStackService } from '../../lib/services/stacks'
import { createImportService } from '../../lib/services/imports'
import { createSnapshotService } from '../../lib/services/snapshots'
import type { ResourceTypeConfig } from '../../lib/resources/types'
import { attachRealtime } from '../../lib/server/realtime'
import type { TestCluster } from './cluster'

export interface ApiServer {
  url: string
  /** The server's log lines at warn level and above (errors are printed too). */
  logs: string[]
  a: { projectId: string; projectName: string; token: string }
  b: { projectId: string; projectName: string; token: string }
  close(): Promise<void>
  /** fetch with a token (or none) and JSON in/out */
  call(method: string, path: string, opts?: { token?: string | null; body?: unknown; headers?: Record<string, string>; raw?: string }): Promise<{ status: number; body: any; headers: Headers; text: string }>
}

/** A new project with one token (shown once, like the API does). */
export async function makeProject(c: TestCluster, role: 'admin' | 'member') {
  const name = `p-${crypto.randomBytes(4).toString('hex')}`
  const { rows } = await c.db.pool.query(`INSERT INTO project (name) VALUES ($1) RETURNING id`, [name])
  const t = await createToken(c.db, rows[0].id, `${name}-token`, { role })
  return { projectId: String(rows[0].id), projectName: name, token: t.secret }
}

export interface ApiServerOptions {
  maxBodyBytes?: number
  /**
   * Failed token attempts per client address per minute. The suites that try hundreds of bad credentials on
   * purpose (isolation, fuzzing) would otherwise test the limit instead of the answers; test/api/edge.test.ts
   * sets a small one to test the limit itself.
   */
  authFailuresPerMinute?: number
  /** The database handle the API uses (default: the cluster's); a test may pass one it closes. */
  db?: Db
  /** How long a saved plan can be applied (KILN_PLAN_TTL_MS; default 24 h). */
  planTtlMs?: number
  /**
   * Messages one socket may send per window (default 600 a minute, as KILN_SOCKET_MESSAGES_PER_MINUTE's default).
   * A test that counts on one window lasting gives it an hour, so that none ends mid-test.
   */
  socketMessageLimit?: { messages: number; windowSeconds: number }
  /** Where an import preview finds objects (default: the cluster's workspace, and its database's server as the target). */
  typeConfig?: ResourceTypeConfig
  /** KILN_MAX_IMPORT_PREVIEW_ITEMS (default 100, as in production). */
  maxImportPreviewItems?: number
  /**
   * Import previews per project (KILN_IMPORT_PREVIEWS_PER_MINUTE; default: unlimited in practice), counted
   * over an hour instead of a minute, so that a test of the limit never races the window's end.
   */
  importPreviewsPerWindow?: number
  /** The port to listen on (default: one the system picks); a test whose workers must reach the API names it in KILN_PUBLIC_URL. */
  port?: number
}

export async function startApiServer(c: TestCluster, opts: ApiServerOptions = {}): Promise<ApiServer> {
  const providerTypes = new ProviderTypes(providerSource(c.db.pool), { publicUrl: 'http://127.0.0.1' })
  await providerTypes.reload()
  const registry = withProviders(createRegistry(builtinTypes(c.builtin)), providerTypes)
  const limits = { maxTemplateBytes: 1 << 20, maxResourcesPerStack: 500 }
  const db = opts.db ?? c.db
  const logs: string[] = []
  const log = createLogger({
    level: 'warn',
    format: 'text',
    sink: (line, level) => {
      logs.push(line)
      if (level === 'error') process.stderr.write(line + '\n')
    },
  })
  let url = ''
  const failedAttempts = failedAttemptLimit({ perMinute: opts.authFailuresPerMinute ?? 1_000_000, log })
  const stacks = createStackService({ db, catalog: typeCatalog(registry), types: registry, limits, defaultTimeoutMins: 30 })
  const typeConfig = opts.typeConfig ?? { workspaceDir: c.workspace, targetDatabaseUrl: c.url }
  const reads = createReadService(db, registry)
  const deps: ApiDeps = {
    db,
    stacks,
    plans: createPlanService({ db, catalog: typeCatalog(registry), types: registry, limits, ttlMs: opts.planTtlMs ?? 86_400_000 }, stacks),
    imports: createImportService({ db, catalog: typeCatalog(registry), types: registry, typeConfig, limits, maxPreviewItems: opts.maxImportPreviewItems ?? 100, stacks, log }),
    importPreviews: projectRateLimit({ requests: opts.importPreviewsPerWindow ?? 1_000_000, windowSeconds: 3600 }),
    reads,
    snapshots: createSnapshotService({ db, types: registry, typeConfig, reads, log }),
    accounts: createAccountService(db),
    providers: createProviderService({ db, changed: () => providerTypes.reload() }),
    registry,
    log,
    maxBodyBytes: opts.maxBodyBytes ?? 2 << 20,
    limits,
    leaseMs: 2000,
    secureCookies: false,
    failedAttempts,
    publicUrl: () => url,
  }
  const server: Server = createServer(toNodeHandler(createApi(deps)))
  const realtime = attachRealtime(server, { url: c.url, db, log, failedAttempts, messageLimit: opts.socketMessageLimit ?? { messages: 600, windowSeconds: 60 } })
  await new Promise<void>((r) => server.listen(opts.port ?? 0, '127.0.0.1', r))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

  const a = await makeProject(c, 'admin')
  const b = await makeProject(c, 'member')

  return {
    url,
    logs,
    a,
    b,
    async close() {
      await realtime.close()
      server.closeAllConnections()
      await new Promise((r) => server.close(() => r(null)))
    },
    async call(method, path, o = {}) {
      const headers: Record<string, string> = { ...(o.headers ?? {}) }
      const token = o.token === undefined ? a.token : o.token
      if (token) headers['x-auth-token'] = token
      let body: string | undefined = o.raw
      if (o.body !== undefined) {
        body = JSON.stringify(o.body)
        headers['content-type'] ??= 'application/json'
      }
      const res = await fetch(url + path, { method, headers, body, redirect: 'manual' })
      const text = await res.text()
      let parsed: unknown
      try {
        parsed = text ? JSON.parse(text) : null
      } catch {
        parsed = null
      }
      return { status: res.status, body: parsed, headers: res.headers, text }
    },
  }
}
