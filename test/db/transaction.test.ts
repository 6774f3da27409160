/**
 * withTransaction when the database goes away between a transaction's
 * statements (a restart, a terminated backend): the call fails, the process
 * does not (an unheard 'error' event on a checked-out client would end it),
 * and the pool replaces the broken connection.
 */
import pg from 'pg'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { withTransaction } from '../../lib/db/client'
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
