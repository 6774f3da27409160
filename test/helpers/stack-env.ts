/**
 * The set-up most suites repeat: a test database (db.ts), worker processes on
 * it (cluster.ts) and, unless asked not to, the API over HTTP
 * (api-server.ts); started in a beforeAll, torn down in an afterAll in the
 * reverse order, each part only if it started.
 *
 *   const { cluster: c, api } = useKilnEnv({ cluster: { workers: 2 } })
 *
 *   test('…', async () => {
 *     const r = await api.call('POST', '/api/stacks', { body })
 *     expect(await c.settle(r.body.stack.id)).toBe('CREATE_COMPLETE')
 *   })
 *
 * Call it at the top of the file (or of a describe), before the file's own
 * hooks: its beforeAll runs first, so a file's beforeAll can use the handles,
 * and its afterAll runs last (Vitest runs after-hooks in reverse), after the
 * file's own clean-up. The handles stand for objects that exist only once
 * the beforeAll has run: they can be taken apart at the top of the file, but
 * using one earlier (while tests are collected) throws.
 */
import { afterAll, beforeAll } from 'vitest'
import { startApiServer, type ApiServer, type ApiServerOptions } from './api-server'
import { TestCluster, type ClusterOptions } from './cluster'
import { testDatabase, type TestDatabase } from './db'

export interface KilnEnvOptions {
  /** The worker processes and their settings (TestCluster.start). */
  cluster: ClusterOptions
  /** The API server's options (startApiServer); false: no API server. Default: one with the defaults. */
  api?: ApiServerOptions | false
  /** Timeout of the start (default: the configuration's hookTimeout). */
  timeoutMs?: number
}

export interface KilnEnv {
  db: TestDatabase
  cluster: TestCluster
  /** Throws when used if the env was asked for no API server. */
  api: ApiServer
}

export function useKilnEnv(opts: KilnEnvOptions): KilnEnv {
  let db: TestDatabase | undefined
  let cluster: TestCluster | undefined
  let api: ApiServer | undefined

  beforeAll(async () => {
    db = await testDatabase()
    cluster = await TestCluster.start(db.url, opts.cluster)
    if (opts.api !== false) api = await startApiServer(cluster, opts.api ?? {})
  }, opts.timeoutMs)

  afterAll(async () => {
    await api?.close()
    await cluster?.stop()
    await db?.drop()
  })

  return {
    db: lateHandle('db', () => db),
    cluster: lateHandle('cluster', () => cluster),
    api: lateHandle('api', () => (opts.api === false ? notStarted('api', 'useKilnEnv was called with api: false') : api)),
  }
}

function notStarted(name: string, why: string): never {
  throw new Error(`${name} is not available: ${why}`)
}

/**
 * A stand-in for an object a beforeAll makes: every property read, write and
 * check goes to the object `get` returns then (methods run with `this` the
 * object itself); before there is one, it throws saying so.
 */
export function lateHandle<T extends object>(name: string, get: () => T | undefined): T {
  const target = (): T => get() ?? notStarted(name, 'its beforeAll has not run (use it inside a hook or a test)')
  return new Proxy({} as T, {
    get(_, key) {
      const t = target()
      const v = Reflect.get(t, key, t)
      return typeof v === 'function' ? v.bind(t) : v
    },
    set: (_, key, value) => Reflect.set(target(), key, value),
    has: (_, key) => Reflect.has(target(), key),
    ownKeys: () => Reflect.ownKeys(target()),
    getOwnPropertyDescriptor: (_, key) => {
      const d = Reflect.getOwnPropertyDescriptor(target(), key)
      return d && { ...d, configurable: true }
    },
    getPrototypeOf: () => Reflect.getPrototypeOf(target()),
  })
}
