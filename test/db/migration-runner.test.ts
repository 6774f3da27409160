/**
 * The start-up migration runner (lib/db/migrate.ts) on small migration
 * folders of its own: name order, one transaction per migration, Prisma's
 * `_prisma_migrations` rows (checked with Prisma's own schema engine, in both
 * directions), the advisory lock, and the refusals (an edited migration, a
 * failed one).
 */
import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { afterAll, afterEach, describe, expect, test } from 'vitest'
import { applyMigrations, MIGRATION_LOCK_KEY, MigrationError, SCHEMA_FILE } from '../../lib/db/migrate'
import { prismaMigrationsList, withSchemaEngine } from '../../lib/db/migration-author'
import { isRetryable } from '../../lib/db/retry'
import { testDatabase, type TestDatabase } from '../helpers/db'

const dbs: TestDatabase[] = []
const dirs: string[] = []

async function emptyDatabase(): Promise<string> {
  const db = await testDatabase({ empty: true })
  dbs.push(db)
  return db.url
}

/** A migrations folder; migrations are written in the order given, which need not be their names' order. */
function folder(migrations: Record<string, string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-migrations-'))
  dirs.push(dir)
  for (const [name, sql] of Object.entries(migrations)) write(dir, name, sql)
  fs.writeFileSync(path.join(dir, 'migration_lock.toml'), 'provider = "postgresql"\n')
  return dir
}

function write(dir: string, name: string, sql: string) {
  fs.mkdirSync(path.join(dir, name), { recursive: true })
  fs.writeFileSync(path.join(dir, name, 'migration.sql'), sql)
}

async function query<T extends pg.QueryResultRow = Record<string, unknown>>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: url })
  await c.connect()
  try {
    return (await c.query<T>(sql, params)).rows
  } finally {
    await c.end()
  }
}

const sha256 = (s: string) => crypto.createHash('sha256').update(s).digest('hex')

const recorded = (url: string) =>
  query<{ migration_name: string; checksum: string; finished_at: Date | null; rolled_back_at: Date | null; started_at: Date; applied_steps_count: number; logs: string | null; id: string }>(
    url,
    'SELECT * FROM _prisma_migrations ORDER BY started_at, migration_name',
  )

const tableColumns = (url: string) =>
  query(url, `SELECT column_name, data_type, character_maximum_length, is_nullable, column_default FROM information_schema.columns WHERE table_name = '_prisma_migrations' ORDER BY ordinal_position`)

const relationExists = async (url: string, name: string) => (await query<{ r: string | null }>(url, 'SELECT to_regclass($1)::text AS r', [name]))[0]!.r !== null

/** A function whose body holds semicolons, as the engine's PL/pgSQL does. */
const FUNCTION = `CREATE OR REPLACE FUNCTION kiln_test_count() RETURNS int LANGUAGE plpgsql AS $$
DECLARE n int;
BEGIN
  SELECT count(*) INTO n FROM item; -- a ';' in a comment, too
  RETURN n;
END $$;
`

const ORDERED = {
  // Written first, applied second: it needs the table of the one below.
  '20260101000002_add_item': `INSERT INTO item (name) VALUES ('first');\nALTER TABLE item ADD COLUMN note text;\n`,
  '20260101000001_create_item': 'CREATE TABLE item (id serial PRIMARY KEY, name text NOT NULL);\n',
  '20260101000003_function': FUNCTION,
}

afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true })
})
afterAll(async () => {
  for (const db of dbs) await db.drop()
})

describe('applyMigrations', () => {
  test('applies the migrations in name order, each recorded as Prisma records one (checksum: sha256 of the file)', async () => {
    const url = await emptyDatabase()
    const dir = folder(ORDERED)
    const names = Object.keys(ORDERED).sort()
    expect(await applyMigrations(url, dir)).toEqual(names)

    expect(await query(url, 'SELECT kiln_test_count() AS n')).toEqual([{ n: 1 }])
    const rows = await recorded(url)
    expect(rows.map((r) => r.migration_name)).toEqual(names)
    for (const r of rows) {
      expect(r.checksum).toBe(sha256(fs.readFileSync(path.join(dir, r.migration_name, 'migration.sql'), 'utf8')))
      expect(r.id).toMatch(/^[0-9a-f-]{36}$/)
      expect(r.finished_at).not.toBeNull()
      expect(r.finished_at!.getTime()).toBeGreaterThanOrEqual(r.started_at.getTime())
      expect(r.rolled_back_at).toBeNull()
      expect(r.logs).toBeNull()
      expect(r.applied_steps_count).toBe(1)
    }
  })

  test('a second run applies nothing and runs nothing again', async () => {
    const url = await emptyDatabase()
    const dir = folder(ORDERED)
    await applyMigrations(url, dir)
    const before = await recorded(url)
    expect(await applyMigrations(url, dir)).toEqual([])
    expect(await recorded(url)).toEqual(before)
    expect(await query(url, 'SELECT count(*)::int AS n FROM item')).toEqual([{ n: 1 }])

    // A new migration: only it is applied.
    write(dir, '20260101000004_more', `INSERT INTO item (name) VALUES ('second');\n`)
    expect(await applyMigrations(url, dir)).toEqual(['20260101000004_more'])
    expect(await query(url, 'SELECT count(*)::int AS n FROM item')).toEqual([{ n: 2 }])
  })

  test('two appliers starting together apply each migration once', async () => {
    const url = await emptyDatabase()
    const dir = folder(ORDERED)
    // Hold the lock, so that both are surely waiting on it together before either starts.
    const holder = new pg.Client({ connectionString: url })
    await holder.connect()
    try {
      await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY])
      let settled = false
      const both = Promise.all([applyMigrations(url, dir), applyMigrations(url, dir)]).finally(() => (settled = true))
      both.catch(() => {}) // awaited below
      // Until both wait (or, without the lock, are done already).
      while (!settled) {
        const { rows } = await holder.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        )
        if (rows[0]!.n === 2) break
        await new Promise((r) => setTimeout(r, 20)) // Timer reason: polling pg_locks, not waiting for an outcome.
      }
      await holder.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY])
      const [a, b] = await both
      expect([a, b].sort((x, y) => x.length - y.length)).toEqual([[], Object.keys(ORDERED).sort()])
    } finally {
      await holder.end()
    }
    expect((await recorded(url)).map((r) => r.migration_name)).toEqual(Object.keys(ORDERED).sort())
    expect(await query(url, 'SELECT count(*)::int AS n FROM item')).toEqual([{ n: 1 }])
  })

  test('an applied migration whose file was edited is refused, naming it, before anything else is applied', async () => {
    const url = await emptyDatabase()
    const dir = folder(ORDERED)
    await applyMigrations(url, dir)
    const file = path.join(dir, '20260101000002_add_item', 'migration.sql')
    const original = fs.readFileSync(file, 'utf8')

    // Line endings a checkout changed are not an edit (as for Prisma).
    fs.writeFileSync(file, original.replace(/\n/g, '\r\n'))
    expect(await applyMigrations(url, dir)).toEqual([])

    fs.writeFileSync(file, original.replace("'first'", "'changed'"))
    write(dir, '20260101000004_more', 'CREATE TABLE more (id int);\n')
    const err = await applyMigrations(url, dir).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(MigrationError)
    expect((err as Error).message).toMatch(/migration 20260101000002_add_item was edited after it was applied/)
    expect(isRetryable(err)).toBe(false)
    expect(await relationExists(url, 'more')).toBe(false)
  })

  test('a failing migration is rolled back whole: the ones before it stay, a clear error names it, and it applies once fixed', async () => {
    const url = await emptyDatabase()
    const bad = `CREATE TABLE half (id int);
${FUNCTION.replace('kiln_test_count', 'kiln_test_half')}
INSERT INTO item (name) VALUES ('from the bad one');
SELECT * FROM no_such_table;
`
    const dir = folder({ '20260101000001_create_item': ORDERED['20260101000001_create_item'], '20260101000002_bad': bad })
    const err = await applyMigrations(url, dir).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(MigrationError)
    expect((err as Error).message).toMatch(/^migration 20260101000002_bad failed at line 10: relation "no_such_table" does not exist\. It was rolled back, nothing of it is applied/)
    expect(isRetryable(err)).toBe(false)

    // Nothing of it: no table, no function, no row, no record; the migration before it is applied.
    expect(await relationExists(url, 'half')).toBe(false)
    expect(await query(url, `SELECT count(*)::int AS n FROM pg_proc WHERE proname = 'kiln_test_half'`)).toEqual([{ n: 0 }])
    expect(await query(url, 'SELECT count(*)::int AS n FROM item')).toEqual([{ n: 0 }])
    expect((await recorded(url)).map((r) => r.migration_name)).toEqual(['20260101000001_create_item'])

    // It was never applied anywhere, so it may be fixed.
    write(dir, '20260101000002_bad', bad.replace('SELECT * FROM no_such_table;', 'SELECT 1;'))
    expect(await applyMigrations(url, dir)).toEqual(['20260101000002_bad'])
    expect(await query(url, 'SELECT kiln_test_half() AS n')).toEqual([{ n: 1 }])
  })

  test('a migration recorded as failed (started, never finished) is refused until it is marked rolled back', async () => {
    const url = await emptyDatabase()
    const dir = folder(ORDERED)
    await applyMigrations(url, dir)
    // What `prisma migrate deploy` leaves when a migration fails part way.
    write(dir, '20260101000004_more', 'CREATE TABLE more (id int);\n')
    await query(url, `INSERT INTO _prisma_migrations (id, checksum, migration_name, logs) VALUES ($1, $2, '20260101000004_more', 'Database error: something broke')`, [
      crypto.randomUUID(),
      sha256('CREATE TABLE more (id int);\n'),
    ])
    const err = await applyMigrations(url, dir).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(MigrationError)
    expect((err as Error).message).toMatch(/migration 20260101000004_more is recorded as failed in _prisma_migrations \(started, never finished: Database error: something broke\)/)
    expect(await relationExists(url, 'more')).toBe(false)

    await query(url, `UPDATE _prisma_migrations SET rolled_back_at = now() WHERE migration_name = '20260101000004_more' AND finished_at IS NULL`)
    expect(await applyMigrations(url, dir)).toEqual(['20260101000004_more'])
  })
})

describe("Prisma's view of the migrations table", () => {
  const schema = fs.readFileSync(SCHEMA_FILE, 'utf8')
  // Prisma's adapter splits a script on ';' (no function bodies here): what its engine can apply.
  const SIMPLE = {
    '20260101000001_create_item': ORDERED['20260101000001_create_item'],
    '20260101000002_add_item': ORDERED['20260101000002_add_item'],
  }

  test("a database Kiln migrated is what Prisma's engine expects: nothing pending, failed or edited, nothing to apply", async () => {
    const url = await emptyDatabase()
    const dir = folder(ORDERED)
    await applyMigrations(url, dir)
    await withSchemaEngine(url, schema, async (engine) => {
      const filters = { externalTables: [], externalEnums: [] }
      const history = await engine.diagnoseMigrationHistory({ migrationsList: prismaMigrationsList(dir), optInToShadowDatabase: false, filters })
      expect(history).toMatchObject({ history: null, failedMigrationNames: [], editedMigrationNames: [], hasMigrationsTable: true })
      expect((await engine.applyMigrations({ migrationsList: prismaMigrationsList(dir), filters })).appliedMigrationNames).toEqual([])
    })
  })

  test("a database Prisma's engine migrated is taken as it is by Kiln, in the same table", async () => {
    const byPrisma = await emptyDatabase()
    const byKiln = await emptyDatabase()
    const dir = folder(SIMPLE)
    await withSchemaEngine(byPrisma, schema, async (engine) => {
      const out = await engine.applyMigrations({ migrationsList: prismaMigrationsList(dir), filters: { externalTables: [], externalEnums: [] } })
      expect(out.appliedMigrationNames).toEqual(Object.keys(SIMPLE))
    })
    expect(await applyMigrations(byPrisma, dir)).toEqual([])
    await applyMigrations(byKiln, dir)
    expect(await tableColumns(byKiln)).toEqual(await tableColumns(byPrisma))
    const strip = (rows: Awaited<ReturnType<typeof recorded>>) => rows.map((r) => ({ name: r.migration_name, checksum: r.checksum, steps: r.applied_steps_count, logs: r.logs }))
    expect(strip(await recorded(byKiln))).toEqual(strip(await recorded(byPrisma)))

    // And Kiln carries on from there.
    write(dir, '20260101000003_function', FUNCTION)
    expect(await applyMigrations(byPrisma, dir)).toEqual(['20260101000003_function'])
  })
})
