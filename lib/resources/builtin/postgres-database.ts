/**
 * Kiln::Postgres::Database: a database and a login role that owns it, on the
 * PostgreSQL server KILN_TARGET_DATABASE_URL names (by default Kiln's own
 * server).
 *
 * Tenant logins reach their own database and nothing else. PostgreSQL lets
 * every role connect to every database unless told otherwise (CONNECT is
 * granted to PUBLIC), so with the default target, Kiln's own server, a
 * tenant's `url` would open Kiln's database: its events, its NOTIFY channels,
 * its advisory locks, its connections. Kiln keeps the shared server (a second
 * server by default would double what `npm start` runs and still need all of
 * this on any server an operator names) and closes every way in:
 *   - every database made here is `REVOKE ALL ... FROM PUBLIC` (its owner, the
 *     tenant's role, keeps CONNECT) before it takes a connection (createClosed);
 *     Kiln's own database is revoked from PUBLIC when a worker starts
 *     (lib/db/access.ts);
 *   - each tenant role has a connection limit (KILN_TENANT_CONNECTION_LIMIT,
 *     or the database's connection_limit when lower), promised out of the
 *     server's budget for tenants and its project's (./postgres-capacity.ts),
 *     NOINHERIT, no other attribute, and is a member of the group
 *     `kiln_tenants` (without inheriting or assuming it), which the embedded
 *     cluster's pg_hba.conf lets reach only the database named like the role
 *     (lib/db/embedded.ts), so the two layers hold each other up;
 *   - ownership is in Kiln's database (outside_object: `pg_database` and
 *     `pg_role`, scope the server's host:port), recorded before anything is
 *     made: never in a catalog comment, which every role reads and the
 *     database's owner, the tenant, can rewrite.
 *
 * Every role on the server can list the names of all databases and roles, so
 * a default name is a hash (hashedName), and an answer about a name that is
 * not the project's is the same whoever holds it (notAdoptable, nameTaken).
 *
 * A create makes or takes over only what a record says this logical resource
 * made; a database or role that exists with no record (an operator's, another
 * application's) is refused, never altered, and never dropped. A delete drops
 * what its own row's records name, whatever state they are in (a worker killed
 * mid-create or mid-drop), after ending any statement a dead attempt left
 * running on the server (its connection is tagged with the object's name), so
 * a CREATE DATABASE that was still waiting cannot finish after the drop.
 *
 * The password is generated once, stored as a secret attribute and sent to the
 * server only as a SCRAM verifier (./scram.ts), so the server's log never
 * holds it.
 */
import { createHash, randomBytes } from 'node:crypto'
import pg from 'pg'
import { defineResourceType, ResourceActionError, type Adopted, type Observation, type OutsideRef, type ResourceContext, type ResourceState } from '../../sdk'
import { checkStorage, ifSnapshotFree, inProjectTurn, inSessionSlot, reserveConnections, tenantRoleLimit, whileRestoringFrom, whileTaking, withProjectLock } from './postgres-capacity'
import { scramVerifier } from './scram'

/** The group every tenant role belongs to (pg_hba.conf of the embedded cluster names it). */
export const TENANT_GROUP = 'kiln_tenants'

const ident = (s: string) => `"${s.replace(/"/g, '""')}"`
const literal = (s: string) => `'${s.replace(/'/g, "''")}'`

/**
 * The name of a database (and its role) whose properties give none: `kiln_`
 * and a hash of the stack's id and the resource's name. Stable per logical
 * resource (a retried create, a replacement row find the same one), and it
 * tells nothing of the stack, the resource or the project: every role on the
 * server can list the names in pg_database and pg_roles.
 */
const hashedName = (ctx: ResourceContext) => `kiln_${createHash('sha256').update(`${ctx.stackId}/${ctx.resourceName}`).digest('hex').slice(0, 24)}`

/** The name databases were given before the hashed one (`kiln_<stack>_<resource>_<stack id>`): those keep it. */
function stackNamedName(ctx: ResourceContext): string {
  const base = `kiln_${ctx.stackName}_${ctx.resourceName}`.toLowerCase().replace(/[^a-z0-9_]/g, '_').slice(0, 50)
  return `${base}_${ctx.stackId.replace(/-/g, '').slice(0, 8)}`
}

/**
 * The database of this logical resource when its properties name none: the
 * stack-named one if a record says this resource made it (a live database is
 * never renamed), else the hashed name.
 */
async function defaultName(ctx: ResourceContext): Promise<string> {
  const old = stackNamedName(ctx)
  const [record] = await ctx.objects.find([databaseRef(ctx, old)])
  return record && record.stackId === ctx.stackId && record.resourceName === ctx.resourceName ? old : hashedName(ctx)
}

/** The database's name: the `name` property, else the one the row already has (`prev`), else the default. */
async function nameOf(ctx: ResourceContext, props: Record<string, unknown>, prev?: ResourceState): Promise<string> {
  if (typeof props.name === 'string' && props.name) return props.name
  const had = prev?.physicalId ?? (prev?.attributes.database as string | undefined)
  return had ?? defaultName(ctx)
}

/** The server, as records name it: names are unique per server. */
function serverOf(url: string): string {
  const u = new URL(url)
  return `${u.hostname}:${u.port || '5432'}`
}

function refs(ctx: ResourceContext, name: string): OutsideRef[] {
  const scope = serverOf(targetUrl(ctx))
  return [{ kind: 'pg_database', scope, key: name }, { kind: 'pg_role', scope, key: name }]
}

const databaseRef = (ctx: ResourceContext, name: string): OutsideRef => refs(ctx, name)[0]!

function targetUrl(ctx: ResourceContext): string {
  const url = ctx.config.targetDatabaseUrl
  if (!url) throw new ResourceActionError('no target PostgreSQL server is configured (KILN_TARGET_DATABASE_URL)')
  return url
}

/** application_name of every connection acting on database `name`, so a later attempt can find one a dead worker left. */
const tagFor = (name: string) => `kiln-pg-${createHash('sha256').update(name).digest('hex').slice(0, 32)}`

/**
 * application_name of a connection that only looks (observe): not the tag of
 * actions, so that an action's endLeftovers never ends a look that runs
 * beside it (an import preview in the web process).
 */
const OBSERVER_TAG = 'kiln-pg-observe'

/** A session on the target server, in one of the process's slots there (Kiln's sessions are bounded: postgres-capacity.ts). */
function withClient<T>(ctx: ResourceContext, name: string, fn: (c: pg.Client) => Promise<T>, tag = tagFor(name), db?: string): Promise<T> {
  return inSessionSlot(ctx.signal, () => session(ctx, fn, tag, db))
}

async function session<T>(ctx: ResourceContext, fn: (c: pg.Client) => Promise<T>, tag: string, db?: string): Promise<T> {
  const url = new URL(targetUrl(ctx))
  if (db !== undefined) url.pathname = `/${db}`
  ctx.signal.throwIfAborted()
  const client = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 10_000, application_name: tag })
  // A server that ends the session (a restart, pg_terminate_backend) between statements emits 'error' on the
  // client; unheard, it would crash the worker. The statement in flight, if any, fails with it: that is the action's error.
  client.on('error', () => {})
  // An abort closes the connection; a statement the server is still running is ended by the next attempt (endLeftovers).
  const onAbort = () => void client.end().catch(() => {})
  ctx.signal.addEventListener('abort', onAbort, { once: true })
  try {
    await client.connect()
    return await fn(client)
  } finally {
    ctx.signal.removeEventListener('abort', onAbort)
    await client.end().catch(() => {})
  }
}

/**
 * End the statements an earlier attempt on `name` left running (a worker
 * killed, or an action aborted, while its CREATE or DROP DATABASE waited or
 * copied: the server goes on with it after the client is gone), and wait until
 * they are over, so what follows sees the server as it will stay.
 */
async function endLeftovers(c: pg.Client, name: string): Promise<void> {
  const { rows } = await c.query<{ gone: boolean }>(
    `SELECT ${await terminator(c)} AS gone FROM pg_stat_activity WHERE application_name = $1 AND usename = current_user AND pid <> pg_backend_pid()`,
    [tagFor(name)],
  )
  if (rows.some((r) => !r.gone)) throw new ResourceActionError(`an earlier attempt on database ${name} is still running on the server; try again`)
}

/** PostgreSQL 14+ waits for the backend to exit (up to 10 s); older ones only signal it. */
async function terminator(c: pg.Client): Promise<string> {
  return (await serverVersion(c)) >= 140000 ? 'pg_terminate_backend(pid, 10000)' : 'pg_terminate_backend(pid)'
}

/** A session in database `db` of the target server (as Kiln's user), tagged as acting on `name`. */
function inDatabase<T>(ctx: ResourceContext, db: string, name: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  return withClient(ctx, name, fn, tagFor(name), db)
}

/** A snapshot's name: stable per row (a retried delete finds the copy it made), at most 63 bytes. */
export function snapshotName(name: string, resourceUuid: string): string {
  return `${name.slice(0, 40)}_snap_${resourceUuid.replace(/-/g, '').slice(0, 12)}`
}

/**
 * deletion_policy Snapshot: before the database is dropped, a copy on the
 * same server, `CREATE DATABASE <snapshot> TEMPLATE <database>`, owned by a
 * role of its own that cannot log in (no tenant reaches it), and recorded as
 * a snapshot (outside_object.snapshot_of) that outlives the row and is listed
 * on its stack. The embedded server is PostgreSQL 18 and ships no pg_dump,
 * and the machine's older pg_dump refuses a newer server: a template copy
 * needs no tool, works offline, and restores with one statement
 * (from_snapshot). The copy's objects are handed from the tenant's role,
 * which the delete then drops, to the snapshot's.
 */
async function snapshot(ctx: ResourceContext, state: ResourceState): Promise<{ name: string } | null> {
  const name = await storedName(ctx, state)
  const snap = snapshotName(name, ctx.resourceUuid)
  return inProjectTurn(ctx.projectId, ctx.signal, () =>
    withClient(ctx, name, async (c) => {
      await endLeftovers(c, name)
      // Within the project's quotas, one copy of the project at a time; the snapshot is held (no delete) until it is recorded.
      return withProjectLock(c, ctx.projectId, () => whileTaking(c, snap, () => takeSnapshot(ctx, c, name, snap)))
    }),
  )
}

async function takeSnapshot(ctx: ResourceContext, c: pg.Client, name: string, snap: string): Promise<{ name: string } | null> {
  const snapRefs = refs(ctx, snap)
  const [records, here, source] = [await ctx.objects.find(snapRefs), await present(c, snap), await present(c, name)]
  if (records.every((r) => r === null) && (here.database || here.role)) throw new ResourceActionError(`${snap} already exists on the server and was not created by Kiln: no snapshot of ${name} was taken`)
  if (!source.database && !here.database) return null // nothing left to copy
  if (source.invalid && !here.database) {
    throw new ResourceActionError(`database ${name} was left half-dropped by an earlier attempt: its data cannot be copied, so no snapshot can be taken (deletion_policy Delete drops it)`)
  }
  if (!here.database) await checkStorage(ctx, c, snapRefs[0]!.scope, { adding: 'snapshot', name: snap, of: name })
  const claim = await ctx.objects.claim(snapRefs, { snapshotOf: name })
  if (claim.outcome !== 'claimed') throw new ResourceActionError(`the snapshot ${snap} could not be recorded (${claim.outcome})`)
  if (!here.role) await c.query(`CREATE ROLE ${ident(snap)} NOLOGIN NOINHERIT`)
  if (!here.database) {
    // A template copy needs the source to have no other session: the tenant's are ended, and no new one may start.
    await c.query(`ALTER DATABASE ${ident(name)} WITH ALLOW_CONNECTIONS false`)
    await c.query(`SELECT ${await terminator(c)} FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [name])
    await createClosed(c, snap, `TEMPLATE ${ident(name)} OWNER ${ident(snap)}`)
  }
  if (source.role) await inDatabase(ctx, snap, name, (d) => d.query(`REASSIGN OWNED BY ${ident(name)} TO ${ident(snap)}; DROP OWNED BY ${ident(name)}`))
  await ctx.objects.settle(snapRefs)
  return { name: snap }
}

/**
 * Drop a kept snapshot and its role (DELETE /api/stacks/{stack}/snapshots/{name}),
 * then forget their records. Busy while a restore copies it or it is being
 * taken: those hold it (postgres-capacity.ts), and a delete never waits.
 */
async function deleteSnapshot(ctx: ResourceContext, snap: string): Promise<{ outcome: 'deleted' } | { outcome: 'busy'; reason: string }> {
  const snapRefs = refs(ctx, snap)
  return withClient(ctx, snap, async (c) => {
    const done = await ifSnapshotFree(c, snap, async () => {
      const mine = await ctx.objects.startDelete(snapRefs)
      if (mine.some((r) => r.kind === 'pg_database')) await c.query(`DROP DATABASE IF EXISTS ${ident(snap)} WITH (FORCE)`)
      if (mine.some((r) => r.kind === 'pg_role')) {
        const dropped = await c.query(`DROP ROLE IF EXISTS ${ident(snap)}`).then(() => true, (err: { code?: string }) => {
          if (err.code !== '2BP01') throw err
          return false
        })
        // A restore that did not finish left objects of the snapshot's role in its database: the records stay (deleting), for another try.
        if (!dropped) return `the snapshot ${snap} is dropped, but its role still owns objects in a database restored from it that did not finish; delete that database, then delete the snapshot again`
      }
      await ctx.objects.forget(mine)
      return null
    })
    if (!done.got) return { outcome: 'busy', reason: `the snapshot ${snap} is being restored into a database or taken right now; try again once that is done` }
    return done.value === null ? { outcome: 'deleted' } : { outcome: 'busy', reason: done.value }
  })
}

/**
 * CREATE DATABASE grants CONNECT and TEMPORARY to PUBLIC, whatever its
 * template says, and cannot run in a transaction with the REVOKE. So a
 * database is made with connections off, PUBLIC's privileges are revoked, and
 * only then may it be connected to: whatever fails, and wherever a worker is
 * killed, no database Kiln makes ever lets PUBLIC in (the owner keeps its own
 * privileges). A database left closed is opened by the next create or update.
 */
async function createClosed(c: pg.Client, name: string, options: string): Promise<void> {
  await c.query(`CREATE DATABASE ${ident(name)} ${options} ALLOW_CONNECTIONS false`)
  await c.query(`REVOKE ALL ON DATABASE ${ident(name)} FROM PUBLIC`)
  await c.query(`ALTER DATABASE ${ident(name)} WITH ALLOW_CONNECTIONS true`)
}

/** Advisory lock class of restores from a snapshot, on the target server ('KRST'). */
const RESTORE_LOCK_CLASS = 0x4b525354

/**
 * A new database made from a snapshot of the same project (from_snapshot):
 * a template copy of it, whose objects are then the new role's. The
 * snapshot stays as it was (its owner is given back in the same transaction).
 *
 * Handing the objects over changes the snapshot's own catalog row (REASSIGN
 * OWNED takes the database too, ALTER gives it back), and two transactions
 * that change one catalog row fail ("tuple concurrently updated"): restores of
 * one snapshot run one at a time, under a session advisory lock keyed by the
 * snapshot on the target server (a wait the server wakes; the session's end
 * releases it). A restore that fails after CREATE DATABASE drops what it made,
 * so that the next attempt copies the snapshot again.
 */
async function restoreInto(ctx: ResourceContext, c: pg.Client, name: string, from: string, dbLimit: number): Promise<void> {
  await c.query(`SELECT pg_advisory_lock($1, hashtext($2))`, [RESTORE_LOCK_CLASS, from])
  try {
    await createClosed(c, name, `TEMPLATE ${ident(from)} OWNER ${ident(name)} CONNECTION LIMIT ${dbLimit}`)
    try {
      await inDatabase(ctx, name, name, (d) => d.query(`BEGIN; REASSIGN OWNED BY ${ident(from)} TO ${ident(name)}; ALTER DATABASE ${ident(from)} OWNER TO ${ident(from)}; COMMIT`))
    } catch (err) {
      await c.query(`DROP DATABASE IF EXISTS ${ident(name)} WITH (FORCE)`).catch(() => {})
      throw err
    }
  } finally {
    await c.query(`SELECT pg_advisory_unlock($1, hashtext($2))`, [RESTORE_LOCK_CLASS, from]).catch(() => {})
  }
}

/** The snapshot `from` names, if it is one of this project's that is there. */
async function snapshotToRestore(ctx: ResourceContext, c: pg.Client, from: string): Promise<void> {
  const [record] = await ctx.objects.find([{ kind: 'pg_database', scope: serverOf(targetUrl(ctx)), key: from }])
  if (!record || record.snapshotOf === null || record.projectId !== ctx.projectId) throw new ResourceActionError(`from_snapshot: ${from} is not a snapshot of this project`)
  if (record.state !== 'present' || !(await present(c, from)).database) throw new ResourceActionError(`from_snapshot: the snapshot ${from} is not there any more`)
}

async function serverVersion(c: pg.Client): Promise<number> {
  return Number((await c.query<{ v: string }>(`SELECT current_setting('server_version_num') AS v`)).rows[0]!.v)
}

/**
 * datconnlimit of a database a DROP DATABASE left half-dropped (PostgreSQL
 * 15.4+ marks it so before removing its files; a worker killed or a server
 * stopped mid-drop leaves the mark). Such a database takes no connection and
 * no ALTER: it can only be dropped, and its data is already partly gone.
 */
const INVALID_DB = -2

async function present(c: pg.Client, name: string): Promise<{ database: boolean; role: boolean; invalid: boolean }> {
  const { rows } = await c.query<{ database: boolean; role: boolean; invalid: boolean }>(
    `SELECT d.oid IS NOT NULL AS database, coalesce(d.datconnlimit = ${INVALID_DB}, false) AS invalid,
            EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1) AS role
       FROM (VALUES (1)) AS one (x) LEFT JOIN pg_database d ON d.datname = $1`,
    [name],
  )
  return rows[0]!
}

/** The tenants' group: no login, no privileges; members neither inherit nor assume it (PostgreSQL 16+). */
async function ensureGroup(c: pg.Client): Promise<void> {
  if ((await c.query(`SELECT 1 FROM pg_roles WHERE rolname = $1`, [TENANT_GROUP])).rowCount) return
  await c.query(`CREATE ROLE ${ident(TENANT_GROUP)} NOLOGIN`).catch((err: { code?: string }) => {
    if (err.code !== '42710' && err.code !== '23505') throw err // made by another worker at the same moment
  })
}

function urlFor(base: string, db: string, role: string, password: string): string {
  const u = new URL(base)
  u.username = role
  u.password = password
  u.pathname = `/${db}`
  u.search = ''
  return u.toString()
}

async function ensure(ctx: ResourceContext, props: Record<string, unknown>, prev?: ResourceState) {
  const name = await nameOf(ctx, props, prev)
  const objects = refs(ctx, name)
  const password = (prev?.attributes.password as string | undefined) ?? randomBytes(18).toString('base64url')
  const dbLimit = Number(props.connection_limit ?? -1)
  const roleLimit = tenantRoleLimit(ctx.config, dbLimit)
  const verifier = await scramVerifier(password)
  await inProjectTurn(ctx.projectId, ctx.signal, () => withClient(ctx, name, async (c) => {
    const records = await ctx.objects.find(objects)
    if (records.every((r) => r === null)) {
      // No record: anything of that name on the server is not Kiln's. Refused before a claim is written.
      const found = await present(c, name)
      if (found.database || found.role) throw nameTaken(name)
    }
    const claim = await ctx.objects.claim(objects)
    if (claim.outcome === 'refused') {
      // Another project's is answered as an operator's would be: whose it is is not this project's to learn.
      if (claim.owner.projectId !== ctx.projectId) throw nameTaken(name)
      throw new ResourceActionError(`database ${name} belongs to resource ${claim.owner.resourceName} of stack ${claim.owner.stackId}`)
    }
    if (claim.outcome === 'busy') throw new ResourceActionError(`database ${name} is being deleted by an older version of this resource; try again once that is done`)
    if (claim.outcome !== 'claimed') throw new ResourceActionError(`database ${name} could not be recorded (${claim.outcome})`)
    ctx.signal.throwIfAborted()
    await endLeftovers(c, name)
    // From here on, whatever exists of that name is this resource's (a record says so).
    const found = await present(c, name)
    if (found.invalid) {
      // Half-dropped by an earlier delete of this resource: finish the drop, and make the database again.
      await c.query(`DROP DATABASE ${ident(name)} WITH (FORCE)`)
      found.database = false
    }
    const from = typeof props.from_snapshot === 'string' ? props.from_snapshot : undefined
    // Taken over from the row a replacement replaces: it exists, and was not made from the snapshot.
    if (from && found.database && !prev && ctx.replacesUuid) {
      throw new ResourceActionError(`from_snapshot: database ${name} exists already (this resource's, before the replacement); restore the snapshot into a database of another name`)
    }
    await ensureGroup(c)
    const restoring = from && !found.database ? from : undefined
    const make = async () => {
      if (restoring) await snapshotToRestore(ctx, c, restoring)
      if (!found.database) await checkStorage(ctx, c, objects[0]!.scope, { adding: 'database', name, ...(restoring ? { from: restoring } : {}) })
      const attrs = `LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS CONNECTION LIMIT ${roleLimit} PASSWORD ${literal(verifier)}`
      await reserveConnections(ctx, c, objects[0]!.scope, name, roleLimit, () => c.query(`${found.role ? 'ALTER' : 'CREATE'} ROLE ${ident(name)} WITH ${attrs}`))
      // PostgreSQL 16+ can say so per membership: the role neither inherits the group's privileges nor may SET ROLE to it.
      const options = (await serverVersion(c)) >= 160000 ? ' WITH INHERIT FALSE, SET FALSE' : ''
      await c.query(`GRANT ${ident(TENANT_GROUP)} TO ${ident(name)}${options}`)
      if (restoring) await restoreInto(ctx, c, name, restoring, dbLimit)
      else if (!found.database) await createClosed(c, name, `OWNER ${ident(name)} CONNECTION LIMIT ${dbLimit}`)
      else {
        // PUBLIC out before connections are allowed again (a create that failed half-way, a snapshot, left them off).
        await c.query(`REVOKE ALL ON DATABASE ${ident(name)} FROM PUBLIC`)
        await c.query(`ALTER DATABASE ${ident(name)} WITH CONNECTION LIMIT ${dbLimit} ALLOW_CONNECTIONS true`)
      }
    }
    // The project's quotas are checked and its databases made one at a time; a restore holds its snapshot (no delete) while it copies.
    await withProjectLock(c, ctx.projectId, () => (restoring ? whileRestoringFrom(c, restoring, make) : make()))
    await ctx.objects.settle(objects)
  }))
  return {
    physicalId: name,
    attributes: { database: name, role: name, password, url: urlFor(targetUrl(ctx), name, name, password) },
  }
}

/** The database a row's object is: its physical id, or (a create that stored nothing) the name its properties give. */
const storedName = async (ctx: ResourceContext, state: ResourceState): Promise<string> => state.physicalId ?? (state.attributes.database as string | undefined) ?? nameOf(ctx, state.properties)

/** A database's catalog row, as observe reads it. */
interface CatalogRow {
  name: string
  limit: number
  owner: string
  role: boolean
  public_connect: boolean
  allowed: boolean
}

/** The catalog rows of the databases of these names that exist (one query, however many names). */
async function catalogRows(c: pg.Client, names: string[]): Promise<Map<string, CatalogRow>> {
  const { rows } = await c.query<CatalogRow>(
    `SELECT d.datname AS name, d.datconnlimit AS limit, pg_get_userbyid(d.datdba) AS owner, d.datallowconn AS allowed,
            EXISTS (SELECT 1 FROM pg_roles WHERE rolname = d.datname) AS role,
            has_database_privilege('public', d.oid, 'CONNECT') AS public_connect
       FROM pg_database d WHERE d.datname = ANY($1::text[])`,
    [names],
  )
  return new Map(rows.map((r) => [r.name, r]))
}

/**
 * The database as its catalog row says: gone, or its connection limit, and
 * as problems whatever the create promised that no longer holds (the role,
 * its ownership, PUBLIC kept out). `named`: the row stores a `name` property.
 */
function observation(name: string, db: CatalogRow | undefined, named: boolean): Observation {
  // A half-dropped database is as good as gone: nothing can connect to it, and a create drops it and starts again.
  if (!db || Number(db.limit) === INVALID_DB) return { state: 'gone' }
  const problems: string[] = []
  if (!db.role) problems.push(`the login role ${name} is missing`)
  else if (db.owner !== name) problems.push(`the database is owned by ${db.owner}, not by its role ${name}`)
  if (db.public_connect) problems.push('PUBLIC may connect to the database')
  if (!db.allowed) problems.push('the database takes no connections (ALLOW_CONNECTIONS is off)')
  return {
    state: 'exists',
    // `name` only when the row stores it (it has no default: the derived name is not a property).
    properties: { ...(named ? { name } : {}), connection_limit: Number(db.limit) },
    ...(problems.length ? { problems } : {}),
  }
}

/** The database as the server has it (one catalog query). */
async function observe(ctx: ResourceContext, state: ResourceState): Promise<Observation> {
  const name = await storedName(ctx, state)
  const rows = await withClient(ctx, name, (c) => catalogRows(c, [name]), OBSERVER_TAG)
  return observation(name, rows.get(name), state.properties.name !== undefined)
}

/** What external_id may name: a database name Kiln's `name` property allows. */
const ADOPTABLE_NAME = /^[a-z_][a-z0-9_]{0,62}$/

/**
 * The one answer for an external_id that names nothing this project may
 * adopt: no such database, one without a Kiln record (an operator's, another
 * application's), another project's, or another project's snapshot. Telling
 * them apart would tell a tenant what other tenants have on the server.
 */
const notAdoptable = (name: string) =>
  new ResourceActionError(`external_id ${name}: not found: there is no database of that name that this project can adopt (only one Kiln made for this project and kept, by deletion_policy: Retain or an earlier adoption, can be)`)

/**
 * The one answer for a `name` that is taken on the server by something that is
 * not this project's (an operator's database or role, another project's).
 */
const nameTaken = (name: string) => new ResourceActionError(`database ${name}: the name is taken on the server by something this project does not own; choose another name`)

/**
 * Adopt databases (external_id: the name) that Kiln made for this project and
 * that no live resource holds any more: kept by `deletion_policy: Retain` or
 * by an earlier adoption, their stack since deleted. Anything else is
 * notAdoptable, answered from Kiln's records before the server is asked:
 * on a shared server a database without a record may be anyone's. Kiln does
 * not know an adopted role's password: `password` and `url` stay null until an
 * update manages the database (external_id removed), which sets a new one.
 *
 * Several at once (an import preview) cost one query of Kiln's records, one
 * connection to the target server and one catalog query, and then the
 * adoption's own check per item: never a connection per database.
 */
async function adoptMany(items: { ctx: ResourceContext; externalId: string }[], opts: { dryRun: boolean }): Promise<(Adopted | Error)[]> {
  const first = items[0]?.ctx
  if (!first) return []
  const answers: (Adopted | Error | undefined)[] = items.map(({ externalId }) =>
    ADOPTABLE_NAME.test(externalId) ? undefined : new ResourceActionError(`external_id ${JSON.stringify(externalId)}: not a database name Kiln makes (lower-case letters, digits and _, at most 63)`),
  )
  const open = () => items.flatMap((item, i) => (answers[i] === undefined ? [{ ...item, i }] : []))
  const records = await first.objects.find(open().map(({ ctx, externalId }) => databaseRef(ctx, externalId)))
  open().forEach(({ ctx, externalId, i }, k) => {
    const record = records[k]
    if (!record || record.projectId !== ctx.projectId) answers[i] = notAdoptable(externalId)
    else if (record.snapshotOf) answers[i] = new ResourceActionError(`external_id ${externalId}: it is a snapshot of ${record.snapshotOf}; restore it into a new database with from_snapshot`)
  })
  const looked = open()
  if (!looked.length) return answers as (Adopted | Error)[]
  const rows = await withClient(first, looked[0]!.externalId, (c) => catalogRows(c, looked.map((l) => l.externalId)), OBSERVER_TAG)
  for (const { ctx, externalId: name, i } of looked) {
    const seen = observation(name, rows.get(name), true)
    if (seen.state === 'gone') {
      answers[i] = notAdoptable(name)
      continue
    }
    const out = await ctx.objects.adopt(refs(ctx, name), { unrecorded: false, dryRun: opts.dryRun })
    switch (out.outcome) {
      case 'adopted':
        answers[i] = { physicalId: name, properties: seen.properties, attributes: { database: name, role: name, password: null, url: null } }
        break
      case 'refused':
        answers[i] = out.owner.projectId === ctx.projectId ? new ResourceActionError(`database ${name} belongs to resource ${out.owner.resourceName} of stack ${out.owner.stackId}`) : notAdoptable(name)
        break
      case 'busy':
        answers[i] = new ResourceActionError(`database ${name} is being acted on by an older version of this resource; try again once that is done`)
        break
      case 'unrecorded':
        answers[i] = notAdoptable(name)
    }
  }
  return answers as (Adopted | Error)[]
}

async function adopt(ctx: ResourceContext, externalId: string, opts: { dryRun: boolean }): Promise<Adopted> {
  const [answer] = await adoptMany([{ ctx, externalId }], opts)
  if (answer instanceof Error) throw answer
  return answer!
}

export const postgresDatabaseResource = defineResourceType({
  name: 'Kiln::Postgres::Database',
  description: 'A PostgreSQL database and a login role owning it, on the configured target server. The role can reach that database only.',
  properties: {
    name: {
      type: 'string',
      description: 'Database (and role) name; default `kiln_` and a hash of the stack id and the resource name (every role on the server can list the names, so a default says nothing of the stack or the project). A change replaces the database.',
      constraints: [{ allowed_pattern: '[a-z_][a-z0-9_]*', description: 'lower-case letters, digits and _' }, { length: { max: 63 } }],
    },
    from_snapshot: {
      type: 'string',
      description: 'Make the database as a copy of this snapshot (one deletion_policy: Snapshot kept, of this project; listed by GET /api/stacks/{stack}/snapshots). A change replaces the database.',
      constraints: [{ allowed_pattern: '[a-z_][a-z0-9_]*', description: 'a snapshot name' }, { length: { max: 63 } }],
    },
    connection_limit: {
      type: 'integer',
      default: -1,
      updateAllowed: true,
      // PostgreSQL holds the limit in an int4.
      constraints: [{ range: { min: -1, max: 2147483647 } }],
      description:
        "Maximum concurrent connections to the database (-1: no limit of its own). The role's limit is KILN_TENANT_CONNECTION_LIMIT, or this when lower: it is what the database counts against the project's and the server's connection budgets.",
    },
  },
  attributes: {
    // Named by `name` only (or by the row, when it has none): a hidden connection_limit says nothing of them.
    database: { description: 'Database name.', type: 'string', derivedFrom: ['name'] },
    role: { description: 'Login role that owns the database.', type: 'string', derivedFrom: ['name'] },
    password: { description: "The role's password.", type: 'string', secret: true },
    url: { description: 'Connection URL for the role (contains the password).', type: 'string', secret: true },
  },
  create: (ctx, props) => ensure(ctx, props),
  update: (ctx, props, prev) => ensure(ctx, props, prev),
  async delete(ctx, state) {
    // A create that stored nothing deletes by the properties it started with (state.properties).
    const name = await storedName(ctx, state)
    const mine = await ctx.objects.startDelete(refs(ctx, name))
    if (!mine.length) return // never recorded, gone, or a successor owns it now
    await withClient(ctx, name, async (c) => {
      await endLeftovers(c, name)
      if (mine.some((r) => r.kind === 'pg_database')) await c.query(`DROP DATABASE IF EXISTS ${ident(name)} WITH (FORCE)`)
      if (mine.some((r) => r.kind === 'pg_role')) await c.query(`DROP ROLE IF EXISTS ${ident(name)}`)
    })
    await ctx.objects.forget(mine)
  },
  // A stack check observes the database (gone, or drifted, fails it): nothing more to check.
  observe,
  // The database is there: ensure() repairs the role, its limits and privileges in place,
  // keeping the password and the data (a replacement would set a new password on it).
  needsReplaceFailed: () => null,
  adopt,
  adoptMany,
  snapshot,
  deleteSnapshot,
})
