/**
 * prisma/schema.prisma and prisma/migrations describe the same database:
 * Prisma's schema engine finds nothing to change from a database the
 * migrations made to the schema. When this fails, schema.prisma changed
 * without a migration: `npm run db:migration <name>` writes it. Also how that
 * command finds what to write (lib/db/migration-author.ts).
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, expect, inject, test } from 'vitest'
import { applyMigrations, listMigrations, MIGRATIONS_DIR, SCHEMA_FILE } from '../../lib/db/migrate'
import { createMigration, diffDatabaseToSchema, isEmptyDiff } from '../../lib/db/migration-author'
import { testDatabase, type TestDatabase } from '../helpers/db'

let db: TestDatabase
const schema = fs.readFileSync(SCHEMA_FILE, 'utf8')
/** schema.prisma with one more column, on a table the hand-written partial indexes are on. */
const changed = schema.replace(/^model Job \{\n/m, 'model Job {\n  note        String?\n')

beforeAll(async () => {
  db = await testDatabase({ empty: true })
  await applyMigrations(db.url)
})
afterAll(async () => {
  await db?.drop()
})

test('a database made by the migrations is what prisma/schema.prisma describes (else: npm run db:migration <name>)', async () => {
  const sql = await diffDatabaseToSchema(db.url, schema)
  expect(isEmptyDiff(sql), `what the migrations lack of schema.prisma:\n${sql}`).toBe(true)
})

test('the diff sees the database: a change to the schema shows, and the hand-written partial indexes are left alone', async () => {
  expect(changed).not.toBe(schema)
  const sql = await diffDatabaseToSchema(db.url, changed)
  expect(sql).toMatch(/ALTER TABLE "job" ADD COLUMN\s+"note" TEXT;/)
  expect(sql).not.toMatch(/DROP INDEX|DROP FUNCTION|_prisma_migrations/)
})

test('`db:migration` writes what changed since the migrations, once', async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-author-'))
  const dir = path.join(tmp, 'migrations')
  const schemaFile = path.join(tmp, 'schema.prisma')
  fs.cpSync(MIGRATIONS_DIR, dir, { recursive: true })
  const scratch = (n: number) => `kiln_t_${inject('runStamp')}_author_${process.pid}_${n}`
  try {
    fs.writeFileSync(schemaFile, schema)
    expect(await createMigration(db.url, 'nothing', { dir, schemaFile, scratchDatabase: scratch(1) })).toBeNull()

    fs.writeFileSync(schemaFile, changed)
    const folder = await createMigration(db.url, 'job note', { dir, schemaFile, scratchDatabase: scratch(2) })
    expect(folder).toMatch(/^\d{14}_job_note$/)
    expect(listMigrations(dir).at(-1)).toBe(folder)
    const sql = fs.readFileSync(path.join(dir, folder!, 'migration.sql'), 'utf8')
    expect(sql).toMatch(/ALTER TABLE "job" ADD COLUMN\s+"note" TEXT;/)
    expect(sql).not.toContain('lib/db/functions')

    // The new migration is now part of what the migrations make.
    expect(await createMigration(db.url, 'again', { dir, schemaFile, scratchDatabase: scratch(3) })).toBeNull()
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
})
