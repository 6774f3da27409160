/**
 * Databases and roles a test made on a shared server (the test cluster, the
 * default target of Kiln::Postgres::Database) outlive the test database it
 * drops: a test names each with `names.fresh()` and drops them, and anything
 * named after them (a snapshot, `<name>_snap_…`), in its afterAll.
 */
import crypto from 'node:crypto'
import type pg from 'pg'

export function serverNames(prefix: string) {
  const made: string[] = []
  return {
    fresh(): string {
      const n = `${prefix}_${crypto.randomBytes(4).toString('hex')}`
      made.push(n)
      return n
    },
    async drop(admin: pg.Client): Promise<void> {
      if (!made.length) return
      const like = made.map((n) => `${n}%`)
      const dbs = await admin.query(`SELECT datname FROM pg_database WHERE datname LIKE ANY($1)`, [like])
      for (const { datname } of dbs.rows) await admin.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`)
      const roles = await admin.query(`SELECT rolname FROM pg_roles WHERE rolname LIKE ANY($1)`, [like])
      for (const { rolname } of roles.rows) await admin.query(`DROP ROLE IF EXISTS "${rolname}"`)
    },
  }
}
