/**
 * Applying Prisma-format migrations at start, with nothing of Prisma's.
 *
 * `prisma/migrations/<name>/migration.sql`, applied in name order, each in a
 * transaction of its own, recorded in Prisma's `_prisma_migrations` table
 * (same columns, the checksum a sha256 of the file), so that a database
 * migrated by Kiln is accepted by `prisma migrate deploy` and the other way
 * round. The whole run holds the advisory lock Prisma's engine takes, so that
 * processes starting together (the web server and the workers, or Kiln and a
 * `prisma migrate deploy`) apply each migration once.
 *
 * Writing a migration needs Prisma's schema engine: that is
 * lib/db/migration-author.ts, imported only by `npm run db:migration`.
 */
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import type pg from 'pg'
import { dropFor, parseStatements, type Statement } from './sql-statements'
import { openClient } from './own-client'

export const MIGRATIONS_DIR = path.resolve('prisma/migrations')
export const SCHEMA_FILE = path.resolve('prisma/schema.prisma')
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

export function listMigrations(dir = MIGRATIONS_DIR) {
  if (!fs.existsSync(dir)) return []
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && fs.existsSync(path.join(dir, d.name, 'migration.sql')))
    .map((d) => d.name)
    .sort()
}

export interface MigrationFile {
  name: string
  sql: string
  /** sha256 of the file, hex: what `_prisma_migrations.checksum` holds */
  checksum: string
}

export function sha256(text: string): string {
  return crypto.createHash('sha256').update(text).digest('hex')
}

/** The migrations of the folder, in the order they are applied. */
export function readMigrations(dir = MIGRATIONS_DIR): MigrationFile[] {
  return listMigrations(dir).map((name) => {
    const sql = fs.readFileSync(path.join(dir, name, 'migration.sql'), 'utf8')
    return { name, sql, checksum: sha256(sql) }
  })
}

/**
 * Whether a file still is what was applied. Like Prisma, a file whose line
 * endings a checkout turned from LF into CRLF (or back) still matches.
 */
function sameFile(file: MigrationFile, recorded: string): boolean {
  if (file.checksum === recorded) return true
  return sha256(file.sql.replace(/\r\n/g, '\n')) === recorded || sha256(file.sql.replace(/\r?\n/g, '\r\n')) === recorded
}

export class MigrationError extends Error {
  override name = 'MigrationError'
}

/** The session-level advisory lock Prisma's schema engine holds while it migrates a PostgreSQL database. */
export const MIGRATION_LOCK_KEY = 72707369

/** Prisma's migrations table, column for column. */
const CREATE_TABLE = `CREATE TABLE IF NOT EXISTS _prisma_migrations (
    id                  VARCHAR(36) PRIMARY KEY NOT NULL,
    checksum            VARCHAR(64) NOT NULL,
    finished_at         TIMESTAMPTZ,
    migration_name      VARCHAR(255) NOT NULL,
    logs                TEXT,
    rolled_back_at      TIMESTAMPTZ,
    started_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    applied_steps_count INTEGER NOT NULL DEFAULT 0
)`

interface Recorded {
  migration_name: string
  checksum: string
  finished_at: Date | null
  logs: string | null
}

/** An error's message; a failed connection to a name with several addresses is an AggregateError without one. */
function message(err: unknown): string {
  if (err instanceof AggregateError && !err.message) return err.errors.map(message).join('; ')
  return err instanceof Error ? err.message : String(err)
}

/**
 * Apply every migration not yet applied, in name order. Returns the names
 * applied (empty if the database was up to date). Throws a MigrationError,
 * having applied nothing, if the database holds migrations this folder does
 * not have, a migration recorded as failed, or an applied migration whose
 * file changed since; and one naming the migration if a migration fails (its
 * transaction rolled back: nothing of it stays, the ones before it do). A
 * driver failure (the server unreachable or going away) is kept as the
 * error's cause, so that isRetryable tells it from a broken migration.
 */
export async function applyMigrations(connectionString: string, dir = MIGRATIONS_DIR): Promise<string[]> {
  const files = readMigrations(dir)
  let client: pg.Client | undefined
  try {
    client = await openClient({ connectionString, application_name: 'kiln-migrate' })
    // Held by the session until it ends, so a lost connection releases it too.
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY])
    // Made when missing only: a role without CREATE on the schema may run an up-to-date database.
    const { rows: table } = await client.query<{ found: boolean }>(`SELECT to_regclass('_prisma_migrations') IS NOT NULL AS found`)
    if (!table[0]!.found) await client.query(CREATE_TABLE)
    const { rows } = await client.query<Recorded>(
      `SELECT migration_name, checksum, finished_at, logs FROM _prisma_migrations WHERE rolled_back_at IS NULL ORDER BY started_at, migration_name`,
    )
    const pending = pendingMigrations(files, rows)
    const applied: string[] = []
    for (const file of pending) {
      await applyOne(client, file)
      applied.push(file.name)
    }
    return applied
  } catch (err) {
    if (err instanceof MigrationError) throw err
    throw new MigrationError(`applying migrations failed: ${message(err)}`, { cause: err })
  } finally {
    // Ending the session releases the advisory lock.
    await client?.end().catch(() => {})
  }
}

/** The files to apply, after checking what the database recorded against them. */
function pendingMigrations(files: MigrationFile[], rows: Recorded[]): MigrationFile[] {
  const byName = new Map(files.map((f) => [f.name, f]))
  const finished = new Map<string, Recorded>()
  for (const r of rows) if (r.finished_at !== null) finished.set(r.migration_name, r)

  const unknown = [...finished.keys()].filter((n) => !byName.has(n)).sort()
  if (unknown.length) {
    // Applying our migrations over that schema would fail on its first CREATE TABLE, or worse.
    throw new MigrationError(
      `the database holds ${unknown.length} migration(s) this version of Kiln does not have (${unknown.slice(0, 3).join(', ')}${unknown.length > 3 ? ', …' : ''}): ` +
        'it was set up by another version. Use that version, or a fresh database (for the embedded one, remove the `pg` folder of the data directory)',
    )
  }

  const failed = rows.filter((r) => r.finished_at === null && !finished.has(r.migration_name))
  if (failed.length) {
    const r = failed[0]!
    const logs = r.logs?.trim().split('\n')[0]
    throw new MigrationError(
      `migration ${r.migration_name} is recorded as failed in _prisma_migrations (started, never finished${logs ? `: ${logs}` : ''}), ` +
        'so the database may hold part of it. Undo by hand what it applied, then mark it rolled back ' +
        `(UPDATE _prisma_migrations SET rolled_back_at = now() WHERE migration_name = '${r.migration_name}' AND finished_at IS NULL) and start again: it will be applied anew`,
    )
  }

  const edited = files.filter((f) => finished.has(f.name) && !sameFile(f, finished.get(f.name)!.checksum))
  if (edited.length) {
    throw new MigrationError(
      `migration ${edited.map((f) => f.name).join(', ')} was edited after it was applied to this database (its file's checksum differs from the one recorded in _prisma_migrations). ` +
        'An applied migration must not change: restore the file, and put the change in a new migration (npm run db:migration <name>)',
    )
  }

  return files.filter((f) => !finished.has(f.name))
}

/**
 * One migration in one transaction: the file sent whole, as one simple-protocol
 * query (PL/pgSQL bodies hold semicolons), then its row, as Prisma writes it
 * for a migration that succeeded.
 */
async function applyOne(client: pg.Client, file: MigrationFile): Promise<void> {
  await client.query('BEGIN')
  let inScript = true
  try {
    await client.query(file.sql)
    inScript = false
    await client.query(
      `INSERT INTO _prisma_migrations (id, checksum, migration_name, started_at, finished_at, applied_steps_count)
       VALUES ($1, $2, $3, now(), clock_timestamp(), 1)`,
      [crypto.randomUUID(), file.checksum, file.name],
    )
    await client.query('COMMIT')
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {})
    if (!fromServer(err)) {
      throw new MigrationError(`applying migration ${file.name} was cut off: ${message(err)} (its transaction commits whole or not at all: starting again carries on)`, { cause: err })
    }
    const e = err as { position?: string; detail?: string; hint?: string }
    const at = inScript && e.position ? ` at line ${lineOf(file.sql, Number(e.position))}` : ''
    const more = [e.detail, e.hint].filter(Boolean).join('; ')
    throw new MigrationError(
      `migration ${file.name} failed${at}: ${message(err)}${more ? ` (${more})` : ''}. It was rolled back, nothing of it is applied; the database stays at the migration before it`,
      { cause: err },
    )
  }
}

/** The line of a 1-based character position in the SQL, as PostgreSQL reports it. */
function lineOf(sql: string, position: number): number {
  return sql.slice(0, Math.max(0, position - 1)).split('\n').length
}

/** An error the server reported about the SQL (a SQLSTATE), not the connection failing or the server going away. */
function fromServer(err: unknown): boolean {
  const code = (err as { code?: unknown }).code
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !/^(08|57P)/.test(code)
}
