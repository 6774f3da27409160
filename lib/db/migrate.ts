/**
 * Prisma migrations without the native schema engine.
 *
 * Prisma 7's CLI downloads a native `schema-engine` binary before every
 * command, which is impossible offline. The same engine is published as
 * WebAssembly (`@prisma/schema-engine-wasm`); we drive it through the pg
 * driver adapter. It writes the standard `_prisma_migrations` table, so a
 * database migrated here is accepted by `prisma migrate deploy` elsewhere and
 * vice versa.
 *
 * Both packages are internal Prisma APIs: versions are pinned exactly, and
 * test/db/migrations.test.ts fails if their behaviour changes.
 */
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { PrismaPg } from '@prisma/adapter-pg'
import pg from 'pg'
import { bindMigrationAwareSqlAdapterFactory } from '@prisma/driver-adapter-utils'
import { dropFor, parseStatements, type Statement } from './sql-statements'
import { openClient } from './own-client'

const require = createRequire(import.meta.url)

export const MIGRATIONS_DIR = path.resolve('prisma/migrations')
export const SCHEMA_FILE = path.resolve('prisma/schema.prisma')
/** The schema as of the newest migration; `createMigration` diffs against it. */
export const SNAPSHOT_FILE = path.resolve('prisma/schema.snapshot.prisma')
/** Hand-written SQL (PL/pgSQL functions, partial indexes): the source of truth. */
export const FUNCTIONS_DIR = path.resolve('lib/db/functions')

/** A migration's hand-written part starts at the first of these headers, one per functions file. */
const SECTION = '-- lib/db/functions/'

function functionFiles(dir: string): string[] {
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    .sort()
}

/** All of lib/db/functions/*.sql in file-name order; every statement is idempotent (CREATE OR REPLACE / IF NOT EXISTS). */
export function functionsSql(dir = FUNCTIONS_DIR): string {
  return functionFiles(dir)
    .map((f) => `${SECTION}${f}\n` + fs.readFileSync(path.join(dir, f), 'utf8').trim() + '\n')
    .join('\n')
}

/** What lib/db/functions defines: each statement by key, in file order. */
export function definedByFunctions(dir = FUNCTIONS_DIR): Map<string, Statement & { file: string }> {
  const out = new Map<string, Statement & { file: string }>()
  for (const file of functionFiles(dir)) {
    for (const st of parseStatements(fs.readFileSync(path.join(dir, file), 'utf8'))) {
      if (st.key.startsWith('drop:')) throw new Error(`lib/db/functions/${file}: ${st.body.split('\n')[0]}: a drop belongs in a migration, not in the functions' source`)
      if (out.has(st.key)) throw new Error(`lib/db/functions/${file}: ${st.key} is defined twice`)
      out.set(st.key, { ...st, file })
    }
  }
  return out
}

/**
 * What the migrations leave defined, replaying the hand-written part of each
 * in order: a definition sets its key, a drop or a `kiln:forget` marker
 * removes it. Equal to definedByFunctions when no function changed without a
 * migration (test/db/migrations.test.ts).
 */
export function definedByMigrations(dir = MIGRATIONS_DIR): Map<string, string> {
  const out = new Map<string, string>()
  for (const name of listMigrations(dir)) {
    const sql = fs.readFileSync(path.join(dir, name, 'migration.sql'), 'utf8')
    const at = sql.startsWith(SECTION) ? 0 : sql.indexOf('\n' + SECTION)
    if (at < 0) continue
    const part = sql.slice(at)
    for (const st of parseStatements(part)) {
      if (st.key.startsWith('drop:')) out.delete(st.key.slice('drop:'.length))
      else out.set(st.key, st.body)
    }
    for (const m of part.matchAll(/^-- kiln:forget (\S+)/gm)) out.delete(m[1]!)
  }
  return out
}

/**
 * The hand-written SQL a new migration needs: every statement of
 * lib/db/functions that is new or differs from what the migrations left, in
 * file order under its file's header (a changed index is dropped first), then
 * a drop for each definition no longer there. A function whose signature or
 * return type changes needs a `DROP FUNCTION` first, which PostgreSQL cannot
 * infer from `CREATE OR REPLACE`: add it to the migration by hand.
 */
export function functionsDelta(functionsDir = FUNCTIONS_DIR, migrationsDir = MIGRATIONS_DIR): string {
  const want = definedByFunctions(functionsDir)
  const have = definedByMigrations(migrationsDir)
  const byFile = new Map<string, string[]>()
  for (const [key, st] of want) {
    const before = have.get(key)
    if (before === st.body) continue
    const parts = byFile.get(st.file) ?? []
    if (before !== undefined && key.startsWith('index:')) parts.push(dropFor(key))
    parts.push(st.text)
    byFile.set(st.file, parts)
  }
  const sections = [...byFile].map(([file, parts]) => `${SECTION}${file}\n${parts.join('\n\n')}\n`)
  const gone = [...have.keys()].filter((k) => !want.has(k))
  if (gone.length) sections.push(`${SECTION}(removed)\n${gone.map(dropFor).join('\n')}\n`)
  return sections.join('\n')
}

type Engine = {
  diff(p: unknown): Promise<{ exitCode: number; stdout: string | null }>
  applyMigrations(p: unknown): Promise<{ appliedMigrationNames: string[] }>
  free(): void
}

type Bindgen = {
  __wbg_set_wasm(exports: WebAssembly.Exports): void
  SchemaEngine: { new: (opts: unknown, log: (msg: string) => void, adapter: unknown) => Promise<Engine> }
}

let bindgen: Promise<Bindgen> | undefined

/** Node 20 cannot `import` a .wasm ESM entry, so instantiate the module by hand. */
function loadBindgen(): Promise<Bindgen> {
  bindgen ??= (async () => {
    const bg = (await import('@prisma/schema-engine-wasm/schema_engine_bg')) as unknown as Bindgen
    const wasmPath = require.resolve('@prisma/schema-engine-wasm/schema_engine_bg').replace(/\.js$/, '.wasm')
    // The engine arms a 10 s timer (via setTimeout) that would keep short-lived
    // processes such as `db:migrate` alive; hand it unref'd timers instead.
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

async function withEngine<T>(connectionString: string, schemaText: string, fn: (e: Engine) => Promise<T>): Promise<T> {
  const bg = await loadBindgen()
  // Our own pool, so that its connections are closed when we are done (an idle
  // connection would keep e.g. a template database busy).
  const pool = new pg.Pool({ connectionString, max: 2, idleTimeoutMillis: 50, allowExitOnIdle: true })
  // An idle connection the server ends (a restart) is reported on the pool; unheard, it would end the process.
  pool.on('error', () => {})
  try {
    const adapter = bindMigrationAwareSqlAdapterFactory(wholeScriptFactory(new PrismaPg(pool)))
    try {
      const engine = await bg.SchemaEngine.new({ datamodels: [['schema.prisma', schemaText]] }, () => {}, adapter)
      try {
        return await fn(engine)
      } finally {
        engine.free()
      }
    } catch (err) {
      throw withDriverError(err, adapter.errorRegistry)
    }
  } finally {
    await pool.end()
  }
}

/**
 * A driver failure the adapter does not translate (not a SQL error, not a
 * socket error: pg's "Connection terminated unexpectedly" when a restarting
 * server hangs up) reaches us from the engine only as "External error id#N";
 * the error itself waits in the adapter's registry under N. Name it, and keep
 * it as the cause, so that a caller can tell a database going away (retried:
 * isRetryable) from a broken migration.
 */
function withDriverError(err: unknown, registry: { consumeError(id: number): { error: unknown } | undefined }): unknown {
  const id = err instanceof Error ? /External error id#(\d+)/.exec(err.message)?.[1] : undefined
  const original = id === undefined ? undefined : registry.consumeError(Number(id))?.error
  if (!(err instanceof Error) || original === undefined) return err
  return new Error(`${err.message.trimEnd()}: ${original instanceof Error ? original.message : String(original)}`, { cause: original })
}

const filters = { externalTables: [], externalEnums: [] }

type ScriptAdapter = { executeScript(script: string): Promise<void>; client: { query(sql: string): Promise<unknown> }; onError(e: unknown): never }

/**
 * @prisma/adapter-pg runs a migration script by splitting it on ';', which
 * breaks PL/pgSQL function bodies. The native engine sends the script whole
 * (one simple-protocol query: one implicit transaction); do the same.
 */
function wholeScriptFactory(factory: PrismaPg): PrismaPg {
  const patch = <T>(adapter: T): T => {
    const a = adapter as unknown as ScriptAdapter
    a.executeScript = async function (this: ScriptAdapter, script: string) {
      try {
        await this.client.query(script)
      } catch (err) {
        this.onError(err)
      }
    }
    return adapter
  }
  const connect = factory.connect.bind(factory)
  const shadow = factory.connectToShadowDb.bind(factory)
  factory.connect = async () => patch(await connect())
  factory.connectToShadowDb = async () => patch(await shadow())
  return factory
}

export function listMigrations(dir = MIGRATIONS_DIR) {
  if (!fs.existsSync(dir)) return []
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && fs.existsSync(path.join(dir, d.name, 'migration.sql')))
    .map((d) => d.name)
    .sort()
}

function migrationsList(dir: string) {
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

export class MigrationError extends Error {
  override name = 'MigrationError'
}

/** Apply every migration not yet applied. Returns the names applied (empty if up to date). */
export async function applyMigrations(connectionString: string, dir = MIGRATIONS_DIR): Promise<string[]> {
  const schemaText = fs.readFileSync(SCHEMA_FILE, 'utf8')
  let unknown: string[]
  try {
    unknown = await unknownMigrations(connectionString, listMigrations(dir))
  } catch (err) {
    throw new MigrationError(`applying migrations failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err })
  }
  if (unknown.length) {
    // Prisma would try to apply our first migration over that schema and fail on its first CREATE TABLE.
    throw new MigrationError(
      `the database holds ${unknown.length} migration(s) this version of Kiln does not have (${unknown.slice(0, 3).join(', ')}${unknown.length > 3 ? ', …' : ''}): ` +
        'it was set up by another version. Use that version, or a fresh database (for the embedded one, remove the `pg` folder of the data directory)',
    )
  }
  try {
    const out = await withEngine(connectionString, schemaText, (e) => e.applyMigrations({ migrationsList: migrationsList(dir), filters }))
    return out.appliedMigrationNames
  } catch (err) {
    const msg = err instanceof Error ? err.message : String(err)
    throw new MigrationError(`applying migrations failed: ${msg}`, { cause: err })
  }
}

/** Migrations recorded as applied in the database that the folder does not have. */
async function unknownMigrations(connectionString: string, known: string[]): Promise<string[]> {
  const client = await openClient({ connectionString })
  try {
    const { rows } = await client.query<{ name: string }>(
      `SELECT migration_name AS name FROM _prisma_migrations WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL ORDER BY migration_name`,
    ).catch((err: { code?: string }) => {
      if (err.code === '42P01') return { rows: [] } // no migrations table yet: a fresh database
      throw err
    })
    const have = new Set(known)
    return rows.map((r) => r.name).filter((n) => !have.has(n))
  } finally {
    await client.end().catch(() => {})
  }
}

/**
 * SQL that turns the `from` schema (or an empty database) into `to`. The engine
 * wants a live connection even for a pure schema diff; nothing is written to it.
 */
export async function diffSchemas(connectionString: string, from: string | null, to: string): Promise<string> {
  const out = await withEngine(connectionString, to, (e) =>
    e.diff({
      from: from === null ? { tag: 'empty' } : { tag: 'schemaDatamodel', files: [{ path: 'schema.prisma', content: from }] },
      to: { tag: 'schemaDatamodel', files: [{ path: 'schema.prisma', content: to }] },
      script: true,
      exitCode: null,
      filters,
    }),
  )
  return out.stdout ?? ''
}

/**
 * Write a new migration folder: the difference between the snapshot and
 * schema.prisma (what `prisma migrate dev --create-only` would write), then
 * the statements of lib/db/functions that changed since the migrations last
 * defined them (functionsDelta). Moves the schema snapshot forward. With no
 * migrations yet, this writes the baseline: the whole schema and every
 * function. Returns the folder name, or null if nothing changed.
 */
export async function createMigration(connectionString: string, name: string, dir = MIGRATIONS_DIR): Promise<string | null> {
  const schema = fs.readFileSync(SCHEMA_FILE, 'utf8')
  const previous = fs.existsSync(SNAPSHOT_FILE) && listMigrations(dir).length ? fs.readFileSync(SNAPSHOT_FILE, 'utf8') : null
  const sql = (await diffSchemas(connectionString, previous, schema)).trim()
  const empty = !sql || /^-- This is an empty migration\.?$/.test(sql)
  const functions = functionsDelta(FUNCTIONS_DIR, dir)
  if (empty && !functions) return null
  const stamp = new Date().toISOString().replace(/[-:TZ.]/g, '').slice(0, 14)
  const folder = `${stamp}_${name.replace(/[^a-zA-Z0-9_]/g, '_')}`
  fs.mkdirSync(path.join(dir, folder), { recursive: true })
  const body = [empty ? '' : sql, functions].filter(Boolean).join('\n\n')
  fs.writeFileSync(path.join(dir, folder, 'migration.sql'), body.trimEnd() + '\n')
  const lock = path.join(dir, 'migration_lock.toml')
  if (!fs.existsSync(lock)) {
    fs.writeFileSync(lock, '# Please do not edit this file manually\n# It should be added in your version-control system (e.g., Git)\nprovider = "postgresql"\n')
  }
  fs.writeFileSync(SNAPSHOT_FILE, schema)
  return folder
}
