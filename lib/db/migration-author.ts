/**
 * Writing a migration (`npm run db:migration <name>`): development time only.
 *
 * Only scripts/db.ts and the tests import this file; start-up (npm start, the
 * workers, `npm run db:migrate`) applies migrations with lib/db/migrate.ts
 * and never loads Prisma's schema engine.
 *
 * Prisma 7's CLI downloads a native `schema-engine` binary before every
 * command, which is impossible offline. The same engine is published as
 * WebAssembly (`@prisma/schema-engine-wasm`); we drive it through the pg
 * driver adapter, for one thing: the SQL from a database to a Prisma schema.
 * What the migrations make is the previous schema: they are applied to a
 * temporary database, and the engine diffs that database to
 * prisma/schema.prisma. Both packages are internal Prisma APIs: their
 * versions are pinned exactly, and test/db/schema-drift.test.ts fails if
 * their behaviour changes.
 */
import crypto from 'node:crypto'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { PrismaPg } from '@prisma/adapter-pg'
import { bindMigrationAwareSqlAdapterFactory, ColumnTypeEnum } from '@prisma/driver-adapter-utils'
import type { DiffTarget, MigrationList, SchemaEngine } from '@prisma/schema-engine-wasm'
import pg from 'pg'
import { applyMigrations, FUNCTIONS_DIR, functionsDelta, listMigrations, MIGRATIONS_DIR, SCHEMA_FILE } from './migrate'
import { openClient } from './own-client'

const require = createRequire(import.meta.url)

type Bindgen = typeof import('@prisma/schema-engine-wasm/schema_engine_bg')

let bindgen: Promise<Bindgen> | undefined
let lastPanic: string | undefined

/** Node 20 cannot `import` a .wasm ESM entry, so instantiate the module by hand. */
function loadBindgen(): Promise<Bindgen> {
  bindgen ??= (async () => {
    // Where the engine reports a panic before it throws (its message is otherwise lost).
    ;(globalThis as { PRISMA_WASM_PANIC_REGISTRY?: unknown }).PRISMA_WASM_PANIC_REGISTRY ??= { set_message: (m: string) => (lastPanic = m) }
    const bg = await import('@prisma/schema-engine-wasm/schema_engine_bg')
    const wasmPath = require.resolve('@prisma/schema-engine-wasm/schema_engine_bg').replace(/\.js$/, '.wasm')
    // The engine arms a 10 s timer (via setTimeout) that would keep a
    // short-lived process such as `db:migration` alive; hand it unref'd timers instead.
    const imports: Record<string, unknown> = { ...(bg as unknown as Record<string, unknown>) }
    for (const key of Object.keys(imports)) {
      if (!key.startsWith('__wbg_setTimeout_')) continue
      imports[key] = (fn: () => void, ms: number) => setTimeout(fn, ms >>> 0).unref()
    }
    const instance = new WebAssembly.Instance(new WebAssembly.Module(fs.readFileSync(wasmPath)), {
      './schema_engine_bg.js': imports as WebAssembly.ModuleImports,
    })
    bg.__wbg_set_wasm(instance.exports)
    ;(instance.exports as { __wbindgen_start?: () => void }).__wbindgen_start?.()
    return bg
  })()
  return bindgen
}

/** PostgreSQL's one-byte `"char"` (pg_catalog's kind and flag columns), and `text`. */
const CHAR_OID = 18
const TEXT_OID = 25

/** The `"char"` columns of a result, by its rows (what the adapter hands on). */
const charColumns = new WeakMap<object, number[]>()

/**
 * @prisma/adapter-pg has no column type for PostgreSQL's `"char"` and refuses
 * a result holding one ("Column type 'char' could not be deserialized"),
 * while the engine's description of a database reads pg_catalog's `"char"`
 * columns and wants them typed as characters. This pool gives such columns
 * to the adapter as text and notes where they were; `withCharacters` then
 * types them as the engine wants.
 */
class CatalogPool extends pg.Pool {
  override query(...args: unknown[]): never {
    const out = (super.query as (...a: unknown[]) => unknown)(...args)
    if (!(out instanceof Promise)) return out as never
    return out.then((result: { fields?: { dataTypeID: number }[]; rows?: object }) => {
      const at: number[] = []
      result?.fields?.forEach((f, i) => {
        if (f.dataTypeID !== CHAR_OID) return
        f.dataTypeID = TEXT_OID
        at.push(i)
      })
      if (at.length && result.rows) charColumns.set(result.rows, at)
      return result
    }) as never
  }
}

type QueryRaw = (q: unknown) => Promise<{ rows: object; columnTypes: number[] }>

function withCharacters(factory: PrismaPg): PrismaPg {
  const connect = factory.connect.bind(factory)
  factory.connect = async () => {
    const adapter = await connect()
    const a = adapter as unknown as { queryRaw: QueryRaw }
    const queryRaw = a.queryRaw.bind(adapter)
    a.queryRaw = async (q) => {
      const out = await queryRaw(q)
      for (const i of charColumns.get(out.rows) ?? []) out.columnTypes[i] = ColumnTypeEnum.Character
      return out
    }
    return adapter
  }
  return factory
}

/**
 * Prisma's schema engine over a connection to `connectionString` (its pool
 * closed afterwards), with `schemaText` as the schema it knows.
 */
export async function withSchemaEngine<T>(connectionString: string, schemaText: string, fn: (e: SchemaEngine) => Promise<T>): Promise<T> {
  const bg = await loadBindgen()
  // Our own pool, so that its connections are closed when we are done (an idle
  // connection would keep the temporary database from being dropped).
  const pool = new CatalogPool({ connectionString, max: 2, idleTimeoutMillis: 50, allowExitOnIdle: true })
  // An idle connection the server ends (a restart) is reported on the pool; unheard, it would end the process.
  pool.on('error', () => {})
  try {
    const adapter = bindMigrationAwareSqlAdapterFactory(withCharacters(new PrismaPg(pool)))
    try {
      const engine = await bg.SchemaEngine.new({ datamodels: [['schema.prisma', schemaText]] }, () => {}, adapter)
      try {
        return await fn(engine)
      } finally {
        try {
          engine.free()
        } catch {
          // after a panic: the error that matters is the one being thrown
        }
      }
    } catch (err) {
      if (err instanceof WebAssembly.RuntimeError && lastPanic) {
        // A panic leaves the instance unusable: the next call makes a new one.
        bindgen = undefined
        const panic = lastPanic
        lastPanic = undefined
        throw new Error(`Prisma's schema engine panicked: ${panic}`, { cause: err })
      }
      throw withDriverError(err, adapter.errorRegistry)
    }
  } finally {
    await pool.end()
  }
}

/**
 * A driver failure the adapter does not translate (pg's "Connection
 * terminated unexpectedly") reaches us from the engine only as "External
 * error id#N"; the error itself waits in the adapter's registry under N.
 * Name it, and keep it as the cause.
 */
function withDriverError(err: unknown, registry: { consumeError(id: number): { error: unknown } | undefined }): unknown {
  const id = err instanceof Error ? /External error id#(\d+)/.exec(err.message)?.[1] : undefined
  const original = id === undefined ? undefined : registry.consumeError(Number(id))?.error
  if (!(err instanceof Error) || original === undefined) return err
  return new Error(`${err.message.trimEnd()}: ${original instanceof Error ? original.message : String(original)}`, { cause: original })
}

const filters = { externalTables: [], externalEnums: [] }
const datamodel = (content: string): DiffTarget => ({ tag: 'schemaDatamodel', files: [{ path: 'schema.prisma', content }] })

/**
 * SQL that turns the `from` schema (or an empty database) into `to`. The engine
 * wants a live connection even for a pure schema diff; nothing is written to it.
 */
export async function diffSchemas(connectionString: string, from: string | null, to: string): Promise<string> {
  const out = await withSchemaEngine(connectionString, to, (e) =>
    e.diff({ from: from === null ? { tag: 'empty' } : datamodel(from), to: datamodel(to), script: true, exitCode: null, filters }),
  )
  return out.stdout ?? ''
}

/** Whether the engine's script changes nothing. */
export function isEmptyDiff(sql: string): boolean {
  const s = sql.trim()
  return !s || /^-- This is an empty migration\.?$/.test(s)
}

/**
 * SQL that turns what the database at `connectionString` holds into what the
 * Prisma schema `to` describes. What the schema language cannot say is left
 * alone: functions, and partial indexes (the hand-written SQL of
 * lib/db/functions), are not in the engine's description of a database.
 */
export async function diffDatabaseToSchema(connectionString: string, to: string): Promise<string> {
  // The engine reaches the database through the adapter (a `url` source is not supported): the
  // datasource of the schema is the adapter's connection.
  const database: DiffTarget = { tag: 'schemaDatasource', configDir: process.cwd(), files: [{ path: 'schema.prisma', content: to }] }
  const out = await withSchemaEngine(connectionString, to, (e) => e.diff({ from: database, to: datamodel(to), script: true, exitCode: null, filters }))
  return out.stdout ?? ''
}

/**
 * A database of its own on the server of `connectionString` (named `name`,
 * or `kiln_migration_<random>`), the folder's migrations applied, for `fn`;
 * dropped afterwards. Needs the right to create databases.
 */
export async function withMigratedScratchDatabase<T>(connectionString: string, dir: string, fn: (url: string) => Promise<T>, name = `kiln_migration_${crypto.randomBytes(6).toString('hex')}`): Promise<T> {
  const admin = await openClient({ connectionString })
  try {
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`)
  } catch (err) {
    await admin.end().catch(() => {})
    throw new Error(`writing a migration needs a scratch database to apply the migrations to, and creating one failed: ${(err as Error).message}`, { cause: err })
  }
  try {
    const u = new URL(connectionString)
    u.pathname = '/' + name
    await applyMigrations(u.toString(), dir)
    return await fn(u.toString())
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`).catch(() => {})
    await admin.end().catch(() => {})
  }
}

export interface CreateMigrationOptions {
  /** the migrations folder (default prisma/migrations) */
  dir?: string
  /** the Prisma schema (default prisma/schema.prisma) */
  schemaFile?: string
  /** the hand-written SQL (default lib/db/functions) */
  functionsDir?: string
  /** the scratch database's name (default kiln_migration_<random>) */
  scratchDatabase?: string
}

/**
 * Write a new migration folder: the difference between what the migrations
 * make and schema.prisma (what `prisma migrate dev --create-only` would
 * write), then the statements of lib/db/functions that changed since the
 * migrations last defined them (functionsDelta). With no migrations yet, this
 * writes the baseline: the whole schema and every function. Returns the
 * folder name, or null if nothing changed.
 *
 * What the migrations make is found by applying them to a scratch database
 * on the server of `connectionString`, which is not changed itself.
 */
export async function createMigration(connectionString: string, name: string, opts: CreateMigrationOptions = {}): Promise<string | null> {
  const dir = opts.dir ?? MIGRATIONS_DIR
  const schema = fs.readFileSync(opts.schemaFile ?? SCHEMA_FILE, 'utf8')
  const sql = await withMigratedScratchDatabase(connectionString, dir, (url) => diffDatabaseToSchema(url, schema), opts.scratchDatabase)
  const tables = isEmptyDiff(sql) ? '' : sql.trim()
  const functions = functionsDelta(opts.functionsDir ?? FUNCTIONS_DIR, dir)
  if (!tables && !functions) return null
  const folder = `${nextStamp(dir)}_${name.replace(/[^a-zA-Z0-9_]/g, '_')}`
  fs.mkdirSync(path.join(dir, folder), { recursive: true })
  const body = [tables, functions].filter(Boolean).join('\n\n')
  fs.writeFileSync(path.join(dir, folder, 'migration.sql'), body.trimEnd() + '\n')
  const lock = path.join(dir, 'migration_lock.toml')
  if (!fs.existsSync(lock)) {
    fs.writeFileSync(lock, '# Please do not edit this file manually\n# It should be added in your version-control system (e.g., Git)\nprovider = "postgresql"\n')
  }
  return folder
}

/**
 * The new migration's timestamp (UTC, yyyymmddhhmmss, as Prisma names them):
 * now, or one second after the newest migration if a clock behind it would
 * put the new one first.
 */
function nextStamp(dir: string): string {
  const now = new Date().toISOString().replace(/[-:TZ.]/g, '').slice(0, 14)
  const last = /^(\d{14})_/.exec(listMigrations(dir).at(-1) ?? '')?.[1]
  if (!last || now > last) return now
  const t = new Date(Date.UTC(+last.slice(0, 4), +last.slice(4, 6) - 1, +last.slice(6, 8), +last.slice(8, 10), +last.slice(10, 12), +last.slice(12, 14)) + 1000)
  return t.toISOString().replace(/[-:TZ.]/g, '').slice(0, 14)
}

/** The migrations folder as the schema engine takes it (for Prisma's own view of a database's migration history). */
export function prismaMigrationsList(dir = MIGRATIONS_DIR): MigrationList {
  const lockPath = path.join(dir, 'migration_lock.toml')
  return {
    baseDir: dir,
    lockfile: { path: 'migration_lock.toml', content: fs.existsSync(lockPath) ? fs.readFileSync(lockPath, 'utf8') : null },
    shadowDbInitScript: '',
    migrationDirectories: listMigrations(dir).map((name) => ({
      path: name,
      migrationFile: { path: 'migration.sql', content: { tag: 'ok', value: fs.readFileSync(path.join(dir, name, 'migration.sql'), 'utf8') } },
    })),
  }
}
