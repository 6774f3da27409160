import pg from 'pg'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { testDatabase, type TestDatabase } from '../helpers/db'

let db: TestDatabase
beforeAll(async () => {
  db = await testDatabase()
})
afterAll(async () => {
  await db.drop()
})

test('each test file gets a migrated database of its own', async () => {
  const c = new pg.Client({ connectionString: db.url })
  await c.connect()
  const r = await c.query(`SELECT count(*)::int AS n FROM _prisma_migrations WHERE finished_at IS NOT NULL`)
  await c.end()
  expect(r.rows[0].n).toBeGreaterThan(0)
})
