/**
 * A connection of its own whose session the server ends while it idles
 * between statements (as a restart does): the process goes on, and the next
 * statement fails. Without a listener, pg's 'error' event for it would end the
 * process (vitest reports it as an unhandled error and fails the file); a
 * worker starting while PostgreSQL restarted died that way.
 */
import pg from 'pg'
import { afterAll, beforeAll, expect, test } from 'vitest'
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
