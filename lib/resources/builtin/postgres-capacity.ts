/**
 * What one project may take of the shared PostgreSQL server that
 * Kiln::Postgres::Database makes databases on, and what Kiln keeps there for
 * itself (docs/operations/security.md, docs/operations/limits.md).
 *
 * Connections. Every tenant role has a connection limit, and the limits of
 * all of them are promised out of a budget: what the server admits
 * (max_connections, less superuser_reserved_connections and
 * reserved_connections) less every connection Kiln itself may hold there
 * (ResourceTypeConfig.kilnConnections). A project's roles together get at most
 * KILN_PROJECT_CONNECTION_LIMIT of it. So tenants holding all they may still
 * leave Kiln its own connections, and each tenant its own, whatever the others
 * do; a create that would promise more is refused, naming the setting. The sum
 * is over this installation's records (outside_object), read under a lock on
 * the server, so two creates never both take the last connections.
 *
 * Storage. Per project: how many databases, how many snapshots, and the bytes
 * they take together, checked (against their sizes now) when a database is
 * made or restored and when a snapshot is taken, under a lock of the project
 * that is held until the copy is made: two restores of one project never both
 * fit in the room left for one. A database grows after it is made; the quota
 * then refuses the project's next database or snapshot.
 *
 * Kiln's own sessions on the server are bounded too (TARGET_SESSIONS_PER_PROCESS),
 * so that what it keeps for itself is a number.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import pg from 'pg'
import { DEFAULT_PROJECT_QUOTAS, DEFAULT_TENANT_CONNECTION_LIMIT } from '../types'
import { ResourceActionError, type OutsideRecord, type ResourceContext, type ResourceTypeConfig } from '../../sdk'

/** Actions of the type one process runs on the target server at once; more wait for a slot (woken when one ends). */
export const TARGET_ACTIONS_PER_PROCESS = 4
/** An action holds at most two sessions: its own, and one in the database it acts on (a restore, a snapshot). */
export const TARGET_SESSIONS_PER_PROCESS = 2 * TARGET_ACTIONS_PER_PROCESS

/** A counting semaphore whose waiters are woken, in order, by a release, or leave when their signal aborts. */
class Slots {
  private waiting: (() => void)[] = []
  constructor(private free: number) {}

  take(signal: AbortSignal): Promise<() => void> {
    signal.throwIfAborted()
    if (this.free > 0) {
      this.free--
      return Promise.resolve(this.releaser())
    }
    return new Promise((resolve, reject) => {
      const woken = () => {
        signal.removeEventListener('abort', onAbort)
        resolve(this.releaser())
      }
      const onAbort = () => {
        this.waiting.splice(this.waiting.indexOf(woken), 1)
        reject(signal.reason)
      }
      signal.addEventListener('abort', onAbort, { once: true })
      this.waiting.push(woken)
    })
  }

  /** Gives the slot to the first waiter, or back. */
  private releaser(): () => void {
    let done = false
    return () => {
      if (done) return
      done = true
      const next = this.waiting.shift()
      if (next) next()
      else this.free++
    }
  }
}

const slots = new Slots(TARGET_ACTIONS_PER_PROCESS)
/** Set while this async flow holds a slot: its nested sessions (a session in the database it acts on) take none. */
const holding = new AsyncLocalStorage<true>()

/** Run `fn` in one of the process's action slots on the target server (nested calls share their caller's). */
export async function inSessionSlot<T>(signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
  if (holding.getStore()) return fn()
  const release = await slots.take(signal)
  try {
    return await holding.run(true, fn)
  } finally {
    release()
  }
}

/** Per project, the actions of this process that make its databases and snapshots take turns (see inProjectTurn). */
const turns = new Map<string, { slots: Slots; users: number }>()

/**
 * Run `fn`, which takes the project's lock on the server, when it is this
 * project's turn in this process. A project's creates, restores and snapshots
 * run one at a time anyway (withProjectLock); waiting for that here, before a
 * session slot is taken, keeps a project's queue to one slot of the process,
 * so that it cannot hold every slot while its long copy runs elsewhere.
 */
export async function inProjectTurn<T>(projectId: string, signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
  let turn = turns.get(projectId)
  if (!turn) turns.set(projectId, (turn = { slots: new Slots(1), users: 0 }))
  turn.users++
  try {
    const release = await turn.slots.take(signal)
    try {
      return await fn()
    } finally {
      release()
    }
  } finally {
    if (--turn.users === 0) turns.delete(projectId)
  }
}

// Advisory lock classes on the target server (two-key locks; Kiln's own database uses 'KILN' and 'KOBJ').
/** 'KTPR': one project's databases and snapshots are made one at a time. */
const PROJECT_LOCK = 0x4b545052
/** 'KTBU': the connection budget is spent one role at a time. */
const BUDGET_LOCK = 0x4b544255
/** 'KTSN': a snapshot is restored from (shared) or taken or deleted (exclusive). */
const SNAPSHOT_LOCK = 0x4b54534e

/**
 * Hold a session-level advisory lock of the target server while `fn` runs. A
 * session that ends (a worker killed, an abort closing the connection) lets
 * go of it; so does the unlock, which fails harmlessly when the session is gone.
 */
async function locked<T>(c: pg.Client, how: { lock: string; unlock: string }, cls: number, key: string, fn: () => Promise<T>): Promise<T> {
  await c.query(`SELECT ${how.lock}($1, hashtext($2))`, [cls, key])
  try {
    return await fn()
  } finally {
    await c.query(`SELECT ${how.unlock}($1, hashtext($2))`, [cls, key]).catch(() => {})
  }
}

const EXCLUSIVE = { lock: 'pg_advisory_lock', unlock: 'pg_advisory_unlock' }
const SHARED = { lock: 'pg_advisory_lock_shared', unlock: 'pg_advisory_unlock_shared' }

/** The project's databases and snapshots are counted, sized and made under this lock, one at a time. */
export const withProjectLock = <T>(c: pg.Client, projectId: string, fn: () => Promise<T>) => locked(c, EXCLUSIVE, PROJECT_LOCK, projectId, fn)

/** A restore holds its snapshot (shared) while it copies it: a delete of the snapshot is refused meanwhile. */
export const whileRestoringFrom = <T>(c: pg.Client, snapshot: string, fn: () => Promise<T>) => locked(c, SHARED, SNAPSHOT_LOCK, snapshot, fn)

/** Taking a snapshot holds it (exclusive) until the copy is made and recorded. */
export const whileTaking = <T>(c: pg.Client, snapshot: string, fn: () => Promise<T>) => locked(c, EXCLUSIVE, SNAPSHOT_LOCK, snapshot, fn)

/** Run `fn` holding snapshot `snapshot` alone; 'busy' at once (no wait) when a restore or a snapshot action holds it. */
export async function ifSnapshotFree<T>(c: pg.Client, snapshot: string, fn: () => Promise<T>): Promise<{ got: true; value: T } | { got: false }> {
  const { rows } = await c.query<{ got: boolean }>(`SELECT pg_try_advisory_lock($1, hashtext($2)) AS got`, [SNAPSHOT_LOCK, snapshot])
  if (!rows[0]!.got) return { got: false }
  try {
    return { got: true, value: await fn() }
  } finally {
    await c.query(`SELECT pg_advisory_unlock($1, hashtext($2))`, [SNAPSHOT_LOCK, snapshot]).catch(() => {})
  }
}

const quotasOf = (config: ResourceTypeConfig) => config.projectQuotas ?? DEFAULT_PROJECT_QUOTAS

/** A tenant role's connection limit: KILN_TENANT_CONNECTION_LIMIT, or the database's connection_limit when lower. */
export function tenantRoleLimit(config: ResourceTypeConfig, databaseLimit: number): number {
  const tenant = config.tenantConnectionLimit ?? DEFAULT_TENANT_CONNECTION_LIMIT
  return databaseLimit >= 0 ? Math.min(databaseLimit, tenant) : tenant
}

export interface ServerCapacity {
  maxConnections: number
  superuserReserved: number
  /** reserved_connections (PostgreSQL 16+; 0 before). */
  reserved: number
  /** What Kiln keeps for its own connections (ResourceTypeConfig.kilnConnections). */
  kiln: number
  /** What all tenant roles together may be given. */
  tenants: number
}

export async function serverCapacity(c: pg.Client | pg.ClientBase, kiln: number): Promise<ServerCapacity> {
  const { rows } = await c.query<{ max: number; su: number; reserved: number }>(
    `SELECT current_setting('max_connections')::int AS max, current_setting('superuser_reserved_connections')::int AS su,
            coalesce(current_setting('reserved_connections', true), '0')::int AS reserved`,
  )
  const { max, su, reserved } = rows[0]!
  return { maxConnections: max, superuserReserved: su, reserved, kiln, tenants: max - su - reserved - kiln }
}

const capacityText = (s: ServerCapacity) =>
  `max_connections ${s.maxConnections} − superuser_reserved_connections ${s.superuserReserved} − reserved_connections ${s.reserved} − ${s.kiln} kept for Kiln's own connections`

/**
 * Give role `name` the connection limit `limit` (`apply` sets it) if the
 * project's and the server's budgets allow it, under the server's budget lock.
 * A role keeping or lowering its limit is never refused.
 */
export async function reserveConnections(ctx: ResourceContext, c: pg.Client, scope: string, name: string, limit: number, apply: () => Promise<unknown>): Promise<void> {
  await locked(c, EXCLUSIVE, BUDGET_LOCK, 'server', async () => {
    const { rows } = await c.query<{ limit: number }>(`SELECT rolconnlimit AS limit FROM pg_roles WHERE rolname = $1`, [name])
    const current = rows[0]?.limit
    if (current === undefined || current < 0 || limit > current) await checkBudget(ctx, c, scope, name, limit)
    await apply()
  })
}

async function checkBudget(ctx: ResourceContext, c: pg.Client, scope: string, name: string, limit: number): Promise<void> {
  const server = await serverCapacity(c, ctx.config.kilnConnections ?? 0)
  const others = (await ctx.objects.inScope('pg_role', scope)).filter((r) => r.key !== name && r.snapshotOf === null)
  const { rows } = await c.query<{ name: string; limit: number }>(`SELECT rolname AS name, rolconnlimit AS limit FROM pg_roles WHERE rolname = ANY($1)`, [others.map((r) => r.key)])
  // A role with no limit of its own (-1) could take every connection the server admits.
  const held = new Map(rows.map((r) => [r.name, r.limit < 0 ? server.maxConnections : r.limit]))
  const sum = (records: OutsideRecord[]) => records.reduce((n, r) => n + (held.get(r.key) ?? 0), 0)
  const project = sum(others.filter((r) => r.projectId === ctx.projectId))
  const cap = quotasOf(ctx.config).connections
  if (project + limit > cap) {
    throw new ResourceActionError(
      `the project's database roles may hold ${cap} connections together (KILN_PROJECT_CONNECTION_LIMIT); its other roles hold ${project}, and ${name}'s ${limit} would take them to ${project + limit}: ` +
        'delete a database of the project, or give this one a lower connection_limit',
    )
  }
  const all = sum(others)
  if (all + limit > server.tenants) {
    throw new ResourceActionError(
      `the target server has ${Math.max(0, server.tenants)} connections for all tenants' databases together (${capacityText(server)}); ` +
        `their roles hold ${all}, and ${name}'s ${limit} would take them to ${all + limit}: ` +
        "raise max_connections on the server, lower KILN_TENANT_CONNECTION_LIMIT, or give this database a lower connection_limit",
    )
  }
}

/** What a create, a restore or a snapshot adds to the project's storage on the server. */
export type StorageChange =
  /** A new database (`from`: restored from that snapshot; else an empty copy of template1). */
  | { adding: 'database'; name: string; from?: string }
  /** A snapshot of database `of`, which is dropped once copied: the copy takes its place. */
  | { adding: 'snapshot'; name: string; of: string }

/**
 * Refuse a change that would take the project past one of its storage quotas
 * (KILN_PROJECT_MAX_DATABASES, KILN_PROJECT_MAX_SNAPSHOTS,
 * KILN_PROJECT_DATABASE_QUOTA_BYTES). Counts and sizes are read from the
 * server for the databases and snapshots the project's records name; call it
 * under withProjectLock, held until the change is made.
 */
export async function checkStorage(ctx: ResourceContext, c: pg.Client, scope: string, change: StorageChange): Promise<void> {
  const quotas = quotasOf(ctx.config)
  const records = (await ctx.objects.inScope('pg_database', scope)).filter((r) => r.projectId === ctx.projectId && r.key !== change.name)
  // A half-dropped database (datconnlimit -2) is as good as gone, and pg_database_size cannot read it.
  const { rows } = await c.query<{ name: string; size: number }>(`SELECT datname AS name, pg_database_size(oid) AS size FROM pg_database WHERE datname = ANY($1) AND datconnlimit <> -2`, [
    records.map((r) => r.key),
  ])
  const snapshots = new Set(records.filter((r) => r.snapshotOf !== null).map((r) => r.key))
  const databases = rows.filter((r) => !snapshots.has(r.name)).length
  const kept = rows.length - databases
  if (change.adding === 'database' && databases >= quotas.databases) {
    throw new ResourceActionError(`the project has ${databases} databases on the target server, its quota (KILN_PROJECT_MAX_DATABASES is ${quotas.databases}): delete one before making ${change.name}`)
  }
  if (change.adding === 'snapshot' && kept >= quotas.snapshots) {
    throw new ResourceActionError(
      `the project keeps ${kept} snapshots, its quota (KILN_PROJECT_MAX_SNAPSHOTS is ${quotas.snapshots}), so no snapshot of ${change.of} was taken and nothing was deleted: ` +
        'delete a snapshot (kiln snapshot delete, DELETE /api/stacks/{stack}/snapshots/{name}), or delete this database with deletion_policy Delete',
    )
  }
  const used = rows.reduce((n, r) => n + Number(r.size), 0)
  const added = await addedBytes(c, change)
  if (used + added > quotas.bytes) {
    const what = change.adding === 'snapshot' ? `a snapshot of ${change.of}` : change.from ? `${change.name}, a copy of ${change.from} (${added} bytes),` : `${change.name}, an empty database (${added} bytes),`
    throw new ResourceActionError(
      `the project's databases and snapshots take ${used} bytes on the target server; ${what} would take them past its quota of ${quotas.bytes} bytes (KILN_PROJECT_DATABASE_QUOTA_BYTES): delete a database or a snapshot of the project`,
    )
  }
}

/**
 * Bytes a change adds once made: a restore, its snapshot's size; a new
 * database, template1's when Kiln may read it (else none); a snapshot, none,
 * as the copy replaces the database it is taken from.
 */
async function addedBytes(c: pg.Client, change: StorageChange): Promise<number> {
  if (change.adding === 'snapshot') return 0
  const sql = change.from
    ? `SELECT coalesce((SELECT pg_database_size(oid) FROM pg_database WHERE datname = $1), 0) AS size`
    : `SELECT CASE WHEN has_database_privilege('template1', 'CONNECT') OR pg_has_role('pg_read_all_stats', 'USAGE') THEN pg_database_size('template1') ELSE 0 END AS size`
  const { rows } = await c.query<{ size: number }>(sql, change.from ? [change.from] : [])
  return Number(rows[0]!.size)
}

/**
 * At start: what the target server leaves for tenants, and what an operator
 * should change. `ownServer`: the target is Kiln's own server, whose
 * connections the tenants' must never starve. Never throws: a server it
 * cannot reach is a warning (the type's actions will say so too).
 */
export async function targetCapacityReport(config: ResourceTypeConfig, opts: { ownServer: boolean }): Promise<{ info: string | null; warnings: string[] }> {
  const url = config.targetDatabaseUrl
  if (!url) return { info: null, warnings: [] }
  const where = new URL(url).host
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000, application_name: 'kiln-bootstrap' })
  c.on('error', () => {})
  try {
    await c.connect()
    const server = await serverCapacity(c, config.kilnConnections ?? 0)
    const { rows } = await c.query<{ user: string; superuser: boolean; reserved_ok: boolean; self_grant: string | null }>(
      `SELECT current_user AS user, r.rolsuper AS superuser,
              CASE WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pg_use_reserved_connections') THEN pg_has_role('pg_use_reserved_connections', 'USAGE') ELSE false END AS reserved_ok,
              current_setting('createrole_self_grant', true) AS self_grant
         FROM pg_roles r WHERE r.rolname = current_user`,
    )
    return { info: capacityInfo(where, server, quotasOf(config).connections), warnings: capacityWarnings(where, server, rows[0]!, opts.ownServer) }
  } catch (err) {
    return { info: null, warnings: [`cannot read the connection settings of the target server ${where} (${(err as Error).message}); Kiln::Postgres::Database will fail until it can reach it`] }
  } finally {
    await c.end().catch(() => {})
  }
}

const capacityInfo = (where: string, s: ServerCapacity, perProject: number) =>
  `tenants' databases on ${where}: ${Math.max(0, s.tenants)} connections for all their roles together (${capacityText(s)}), at most ${perProject} per project (KILN_PROJECT_CONNECTION_LIMIT)`

function capacityWarnings(where: string, s: ServerCapacity, role: { user: string; superuser: boolean; reserved_ok: boolean; self_grant: string | null }, ownServer: boolean): string[] {
  const out: string[] = []
  if (s.tenants <= 0) {
    out.push(`no connections are left for tenants' databases on ${where} (${capacityText(s)}): every Kiln::Postgres::Database create will be refused; raise max_connections (or lower WORKERS or KILN_WORKER_CONCURRENCY)`)
  }
  // Slots the server keeps for Kiln's role beyond what tenants' roles may ever take.
  const kept = (role.superuser ? s.superuserReserved : 0) + (role.superuser || role.reserved_ok ? s.reserved : 0)
  if (ownServer && kept < s.kiln) {
    out.push(
      `the server ${where} keeps ${kept} connection slots for Kiln's role ${role.user}, fewer than the ${s.kiln} Kiln may need: its connections are kept free from tenants by their budget alone ` +
        `(roles another application makes, or limits raised by hand, could take them). As a superuser, set reserved_connections to at least ${s.kiln} (PostgreSQL 16+, a restart)` +
        (role.superuser || role.reserved_ok ? '' : ` and run: GRANT pg_use_reserved_connections TO "${role.user}";`),
    )
  }
  const grants = (role.self_grant ?? '').split(',').map((g) => g.trim())
  if (!role.superuser && role.self_grant !== null && !(grants.includes('set') && grants.includes('inherit'))) {
    out.push(
      `Kiln's role ${role.user} is not a superuser: to make databases owned by the roles it makes and to drop them, it must be a member of those roles; as a superuser, run: ALTER ROLE "${role.user}" SET createrole_self_grant = 'set, inherit';`,
    )
  }
  return out
}
