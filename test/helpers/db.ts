/**
 * A fresh, migrated database for one test file:
 *
 *   const db = await testDatabase()      // in beforeAll
 *   ... db.url ...
 *   await db.drop()                      // in afterAll
 */
import crypto from 'node:crypto'
import pg from 'pg'
import { inject } from 'vitest'

export interface TestDatabase {
  name: string
  url: string
  /** URL of another database on the same server (e.g. `postgres`). */
  urlFor(db: string): string
  drop(): Promise<void>
}

function withDatabase(url: string, db: string) {
  const u = new URL(url)
  u.pathname = '/' + db
  return u.toString()
}

export async function testDatabase(opts: { empty?: boolean } = {}): Promise<TestDatabase> {
  const adminUrl = inject('adminUrl')
  const name = `kiln_t_${inject('runStamp')}_${crypto.randomBytes(5).toString('hex')}`
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  try {
    // CREATE DATABASE ... TEMPLATE needs the template to have no other sessions; retry briefly if a clone is in progress.
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.query(opts.empty ? `CREATE DATABASE "${name}"` : `CREATE DATABASE "${name}" TEMPLATE "${inject('templateDb')}"`)
        break
      } catch (err) {
        if (attempt > 50 || (err as { code?: string }).code !== '55006') throw err
        await new Promise((r) => setTimeout(r, 50 + Math.random() * 100))
      }
    }
  } finally {
    await admin.end()
  }
  return {
    name,
    url: withDatabase(adminUrl, name),
    urlFor: (db) => withDatabase(adminUrl, db),
    async drop() {
      const c = new pg.Client({ connectionString: adminUrl })
      await c.connect()
      try {
        await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
      } finally {
        await c.end()
      }
    },
  }
}
