/**
 * The web process's shared handles (database, services, registry), created on
 * first use from the environment and kept on globalThis so that Next's module
 * reloading (dev) and the custom server share one pool.
 */
import { env, type Env } from '../env'
import { createDb, type Db } from '../db/client'
import { builtinOptionsFrom, limitsFrom, publicUrlFrom, typeConfigFrom, WEB_POOL_SIZE } from '../config'
import { failedAttemptLimit, type FailedAttemptLimit } from '../auth/failed-attempts'
import type { ClientInfo } from '../api/http'
import { builtinTypes, createRegistry, typeCatalog, withProviders, type Registry } from '../resources/registry'
import { ProviderTypes } from '../resources/provider/provider-types'
import type { ResourceType } from '../resources/types'
import { providerSource } from '../db/queries/providers'
import { createProviderService } from '../services/providers'
import { createStackService, type StackService } from '../services/stacks'
import { createPlanService } from '../services/plans'
import { createLogger, type Logger } from '../logger'
import { createAccountService, type AccountService } from '../services/accounts'
import { createReadService, type ReadService } from '../services/reads'
import { createImportService } from '../services/imports'
import { createSnapshotService } from '../services/snapshots'
import { createApi } from '../api'
import type { ApiDeps } from '../api/deps'
import { projectRateLimit } from '../api/project-rate'

export interface AppContext {
  env: Env
  db: Db
  registry: Registry
  /** The providers' types, loaded before the server listens. */
  providerTypes: ProviderTypes
  stacks: StackService
  reads: ReadService
  accounts: AccountService
  log: Logger
  /** The REST and Heat APIs: `(Request, client) => Response`. */
  api: (req: Request, client?: ClientInfo) => Promise<Response>
  /** Failed credential attempts per client address, shared by the APIs and the Socket.IO handshake. */
  failedAttempts: FailedAttemptLimit
  /** Tell the context the port the server bound (the public URL's default names it); returns the public URL. */
  listening(port: number): string
}

const KEY = Symbol.for('kiln.appContext')
type Holder = { [KEY]?: AppContext }

/** `packages`: the type packages' types (KILN_TYPE_PACKAGES), loaded by the caller before the first call. */
export function appContext(opts: { packages?: ResourceType[] } = {}): AppContext {
  const g = globalThis as Holder
  if (g[KEY]) return g[KEY]
  const e = env()
  if (!e.DATABASE_URL) throw new Error('DATABASE_URL is not set (the launcher sets it for the web server)')
  const db = createDb(e.DATABASE_URL, { max: WEB_POOL_SIZE, application: 'kiln-web' })
  // A provider's types: loaded before the server listens (server.ts), reloaded when this process registers one.
  const providerTypes = new ProviderTypes(providerSource(db.pool), { publicUrl: publicUrlFrom(e, e.PORT), timeoutMs: e.KILN_PROVIDER_TIMEOUT_MS })
  const registry = withProviders(createRegistry(builtinTypes({ ...builtinOptionsFrom(e), packages: opts.packages ?? [] })), providerTypes)
  const log = createLogger({ level: e.KILN_LOG_LEVEL, format: e.KILN_LOG_FORMAT }).scope({ proc: 'web' })
  const stacks = createStackService({ db, catalog: typeCatalog(registry), types: registry, limits: limitsFrom(e), defaultTimeoutMins: e.KILN_DEFAULT_TIMEOUT_MINS })
  const plans = createPlanService({ db, catalog: typeCatalog(registry), types: registry, limits: limitsFrom(e), ttlMs: e.KILN_PLAN_TTL_MS }, stacks)
  const reads = createReadService(db, registry)
  // The import preview looks at objects from here, as a worker would find them.
  const imports = createImportService({ db, catalog: typeCatalog(registry), types: registry, typeConfig: typeConfigFrom(e, e.DATABASE_URL), limits: limitsFrom(e), maxPreviewItems: e.KILN_MAX_IMPORT_PREVIEW_ITEMS, stacks, log })
  const importPreviews = projectRateLimit({ requests: e.KILN_IMPORT_PREVIEWS_PER_MINUTE, windowSeconds: 60 })
  const accounts = createAccountService(db)
  const snapshots = createSnapshotService({ db, types: registry, typeConfig: typeConfigFrom(e, e.DATABASE_URL), reads, log })
  const failedAttempts = failedAttemptLimit({ perMinute: e.KILN_AUTH_FAILURES_PER_MINUTE, log })
  let publicUrl = publicUrlFrom(e, e.PORT)
  const providers = createProviderService({ db, changed: () => providerTypes.reload(), packagePrefixes: (opts.packages ?? []).map((t) => t.name.split('::')[0]!) })
  const deps: ApiDeps = { db, stacks, plans, imports, importPreviews, reads, snapshots, accounts, providers, registry, log, failedAttempts, maxBodyBytes: e.KILN_MAX_BODY_BYTES, limits: limitsFrom(e), leaseMs: e.KILN_LEASE_MS, secureCookies: e.KILN_SECURE_COOKIES, publicUrl: () => publicUrl }
  // PORT=0 binds a port chosen by the system: the default public URL names the one bound.
  const listening = (port: number) => (publicUrl = publicUrlFrom(e, port))
  const ctx: AppContext = { env: e, db, registry, providerTypes, stacks, reads, accounts, log, api: createApi(deps), failedAttempts, listening }
  g[KEY] = ctx
  return ctx
}
