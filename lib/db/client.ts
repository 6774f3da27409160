/**
 * Database handles. A process creates one `Db` from its DATABASE_URL and
 * passes it down; only lib/db imports pg and Prisma.
 *
 * - `pool`: node-postgres, used by the hot path (lib/db/queries): engine
 *   functions, the queue, LISTEN/NOTIFY, and the services' other reads.
 * - `prisma`: Prisma Client over the same pool (driver adapter), used for
 *   ordinary reads and writes (projects, tokens, sessions). The listings
 *   (stacks, resources, events) stay SQL: Prisma Client measured 1.3–1.9
 *   times slower there (bench/listings.ts).
 */
import { PrismaPg } from '@prisma/adapter-pg'
import pg from 'pg'
import { PrismaClient } from './generated/client'

// BIGINT (job ids, event seq) as strings would leak into every caller; our values fit in 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v))

export interface Db {
  pool: pg.Pool
  prisma: PrismaClient
  url: string
  /** Resolves once a warm pool has opened its connections. */
  ready: Promise<void>
  close(): Promise<void>
}

/**
 * Open `n` connections at once (each is held until every one has been asked
 * for, so the pool makes `n`), then give them all back. A held client has no
 * listener of the pool's: one the server ends meanwhile (a restart while a
 * worker starts) is heard here and released as broken, never an unheard
 * 'error' event, which would end the process. A connect that fails gives the
 * others back too, so that closing the pool does not wait for them.
 */
export async function warmPool(pool: pg.Pool, n: number): Promise<void> {
  const held: { client: pg.PoolClient; lost?: Error; onError: (err: Error) => void }[] = []
  const opened = await Promise.allSettled(
    Array.from({ length: n }, async () => {
      const client = await pool.connect()
      const h: (typeof held)[number] = { client, onError: (err) => (h.lost = err) }
      client.on('error', h.onError)
      held.push(h)
    }),
  )
  for (const h of held) {
    h.client.off('error', h.onError)
    h.client.release(h.lost)
  }
  const failed = opened.find((r): r is PromiseRejectedResult => r.status === 'rejected')
  if (failed) throw failed.reason
}

export interface DbOptions {
  /** Connections in the pool (default 10). */
  max?: number
  application?: string
  /**
   * Open all `max` connections at once and never close an idle one (a worker):
   * a connection costs a fork and a SCRAM handshake (~5–10 ms of CPU on both
   * sides), which a burst of finishing nodes would otherwise pay on its
   * critical path (bench: the first layer of layered-100 with 0.2 s actions
   * ended ~50 ms late while its worker's pool grew from 4 to 8).
   */
  warm?: boolean
}

export function createDb(url: string, opts: DbOptions = {}): Db {
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? 10,
    application_name: opts.application ?? 'kiln',
    idleTimeoutMillis: opts.warm ? 0 : 30_000,
  })
  // An idle client losing its connection (e.g. a database restart) must not crash the process.
  pool.on('error', () => {})
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool) })
  let closed = false
  return {
    pool,
    prisma,
    url,
    ready: opts.warm ? warmPool(pool, opts.max ?? 10) : Promise.resolve(),
    async close() {
      if (closed) return
      closed = true
      await prisma.$disconnect().catch(() => {})
      await pool.end().catch(() => {})
    },
  }
}

/** Run `fn` in a transaction on one pooled client (BEGIN … COMMIT, ROLLBACK on error). */
export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect()
  // A connection lost between the transaction's statements (a database restart)
  // is reported as an 'error' event, which would end the process unheard (the
  // pool listens only to idle clients); the next statement fails with it anyway.
  // The broken client is then destroyed, not returned to the pool.
  let lost: Error | undefined
  const onError = (err: Error) => {
    lost = err
  }
  client.on('error', onError)
  try {
    await client.query('BEGIN')
    const out = await fn(client)
    await client.query('COMMIT')
    return out
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {})
    throw err
  } finally {
    client.off('error', onError)
    client.release(lost)
  }
}

export type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient
