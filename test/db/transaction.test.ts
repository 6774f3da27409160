/**
 * withTransaction when the database goes away between a transaction's
 * statements (a restart, a terminated backend): the call fails, the process
 * does not (an unheard 'error' event on a checked-out client would end it),
 * and the pool replaces the broken connection.
 */
import net from 'node:net'
import pg from 'pg'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { withTransaction } from '../../lib/db/client'
import { applyMigrations } from '../../lib/db/migrate'
import { isRetryable } from '../../lib/db/retry'
import { testDatabase, type TestDatabase } from '../helpers/db'

let db: TestDatabase
beforeAll(async () => {
  db = await testDatabase({ empty: true })
})
afterAll(async () => {
  await db?.drop()
})

test("a connection lost between a transaction's statements fails the call, not the process", async () => {
  const pool = new pg.Pool({ connectionString: db.url, max: 1 })
  pool.on('error', () => {})
  const other = new pg.Client({ connectionString: db.url })
  await other.connect()
  try {
    const call = withTransaction(pool, async (client) => {
      const { rows } = await client.query('SELECT pg_backend_pid() AS pid')
      // The backend goes away while no statement runs: the client hears it as an 'error'
      // event (the test must not listen itself: the point is who else does).
      await other.query('SELECT pg_terminate_backend($1)', [rows[0].pid])
      for (;;) {
        const { rows: left } = await other.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1', [rows[0].pid])
        if (left[0].n === 0) break
      }
      // Timer reason: give the client's socket time to deliver the termination message.
      await new Promise((r) => setTimeout(r, 200))
      await client.query('SELECT 1')
    })
    await expect(call).rejects.toThrow()
    // The broken connection was not handed out again.
    expect((await pool.query('SELECT 1 AS one')).rows[0].one).toBe(1)
  } finally {
    await other.end()
    await pool.end()
  }
})

/** What each caller gets when the database goes away, from the real clients: retried (engine calls) or waited for (a starting worker). */
test('a terminated backend and a closed port count as transient, for pg and for the migration engine; a bad statement does not', { timeout: 30_000 }, async () => {
  const victim = new pg.Client({ connectionString: db.url })
  victim.on('error', () => {})
  await victim.connect()
  const other = new pg.Client({ connectionString: db.url })
  await other.connect()
  try {
    const { rows } = await victim.query('SELECT pg_backend_pid() AS pid')
    const terminated = victim.query('SELECT pg_sleep(10)').catch((e: unknown) => e)
    await new Promise((r) => setTimeout(r, 200)) // Timer reason: let the sleep start before the backend is ended.
    await other.query('SELECT pg_terminate_backend($1)', [rows[0].pid])
    expect(isRetryable(await terminated)).toBe(true)
    expect(isRetryable(await other.query('SELEC 1').catch((e: unknown) => e))).toBe(false)
  } finally {
    await other.end()
    await victim.end().catch(() => {})
  }

  // A port nobody listens on: bind one, then close it.
  const port = await new Promise<number>((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (srv.address() as net.AddressInfo).port
      srv.close(() => resolve(p))
    })
  })
  const closed = `postgresql://kiln:x@127.0.0.1:${port}/kiln`
  const refused = await new pg.Client({ connectionString: closed }).connect().catch((e: unknown) => e)
  expect(isRetryable(refused)).toBe(true)
  const migration = (await applyMigrations(closed).catch((e: unknown) => e)) as Error
  expect(migration).toBeInstanceOf(Error)
  expect(isRetryable(migration) || isRetryable(migration.cause)).toBe(true)

  // A server that accepts and hangs up at once, as a restarting PostgreSQL does:
  // the migration error names the driver's error and counts as transient.
  const hangUp = net.createServer((socket) => socket.destroy()).listen(0, '127.0.0.1')
  await new Promise((r) => hangUp.once('listening', r))
  try {
    const url = `postgresql://kiln:x@127.0.0.1:${(hangUp.address() as net.AddressInfo).port}/kiln`
    const hungUp = (await applyMigrations(url).catch((e: unknown) => e)) as Error
    expect(hungUp).toBeInstanceOf(Error)
    expect(hungUp.message).toMatch(/Connection terminated/)
    expect(isRetryable(hungUp)).toBe(true)
  } finally {
    hangUp.close()
  }
})
