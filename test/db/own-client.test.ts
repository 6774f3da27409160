/**
 * Connections whose session the server ends while nothing listens for it
 * (as a restart does): a connection of its own idling between statements,
 * and a pooled one a warming pool holds. The process goes on. Without a
 * listener, pg's 'error' event would end the process (vitest reports it as an
 * unhandled error and fails the file); workers starting while PostgreSQL
 * restarted died that way.
 */
import pg from 'pg'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { warmPool } from '../../lib/db/client'
import { openClient } from '../../lib/db/own-client'
import { testDatabase, type TestDatabase } from '../helpers/db'

let db: TestDatabase
beforeAll(async () => {
  db = await testDatabase()
})
afterAll(async () => {
  await db.drop()
})

test('a session ended by the server between statements does not end the process; the next statement fails', async () => {
  const c = await openClient({ connectionString: db.url })
  const ended = new Promise((resolve) => c.once('end', resolve))
  const pid = (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid
  const admin = new pg.Client({ connectionString: db.url })
  await admin.connect()
  // Waits until the backend has exited, by which time its FATAL message has been sent.
  expect((await admin.query('SELECT pg_terminate_backend($1, 10000) AS gone', [pid])).rows[0].gone).toBe(true)
  await admin.end()
  await ended
  await expect(c.query('SELECT 1')).rejects.toThrow()
})

test('a warming pool whose first connection the server ends while the others open: warmed all the same, the broken one dropped', async () => {
  const admin = new pg.Client({ connectionString: db.url })
  await admin.connect()
  const opened: pg.ClientBase[] = []
  // The second connection opens only once the first, already held by the warm-up, has been ended by the server.
  const pool = new pg.Pool({
    connectionString: db.url,
    max: 3,
    onConnect: async (client: pg.ClientBase) => {
      opened.push(client)
      if (opened.length !== 2) return
      const first = opened[0]!
      const ended = new Promise((resolve) => first.once('end', resolve))
      await admin.query('SELECT pg_terminate_backend($1, 10000)', [(first as unknown as { processID: number }).processID])
      await ended
    },
  })
  pool.on('error', () => {})
  try {
    await warmPool(pool, 3)
    expect(opened).toHaveLength(3)
    expect(pool.totalCount).toBe(2)
    expect((await pool.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }])
  } finally {
    await pool.end()
    await admin.end()
  }
})
