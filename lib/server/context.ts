/**
 * The web process's shared handles (database, services, registry), created on
 * first use from the environment and kept on globalThis so that Next's module
 * reloading (dev) and the custom server share one pool.
 */
import { env, type Env } from '../env'
import { createDb, type Db } from '../db/client'
import { limitsFrom } from '../config'
import { builtinTypes, createRegistry, typeCatalog } from '../resources/registry'
import { createStackService, type StackService } from '../services/stacks'
import { createLogger, type Logger } from '../logger'

export interface AppContext {
  env: Env
  db: Db
  registry: ReturnType<typeof createRegistry>
  stacks: StackService
  log: Logger
}

const KEY = Symbol.for('kiln.appContext')
type Holder = { [KEY]?: AppContext }

export function appContext(): AppContext {
  const g = globalThis as Holder
  if (g[KEY]) return g[KEY]
  const e = env()
  if (!e.DATABASE_URL) throw new Error('DATABASE_URL is not set (the launcher sets it for the web server)')
  const db = createDb(e.DATABASE_URL, { max: 20, application: 'kiln-web' })
  const registry = createRegistry(builtinTypes())
  const ctx: AppContext = {
    env: e,
    db,
    registry,
    stacks: createStackService({ db, catalog: typeCatalog(registry), types: registry, limits: limitsFrom(e), defaultTimeoutMins: e.KILN_DEFAULT_TIMEOUT_MINS }),
    log: createLogger({ level: e.KILN_LOG_LEVEL, format: e.KILN_LOG_FORMAT }).scope({ proc: 'web' }),
  }
  g[KEY] = ctx
  return ctx
}
