/**
 * Kiln::Postgres::Database: a database and a login role that owns it, on the
 * PostgreSQL server KILN_TARGET_DATABASE_URL names (by default Kiln's own
 * server).
 *
 * Ownership lives on the server itself: `COMMENT ON DATABASE` records
 * `kiln:<stack id>:<resource name>:<row uuid>`. A create takes over a database
 * its own logical resource made (a retry after a worker died mid-create, or a
 * replacement row), refuses one anything else made, and a delete drops only
 * what its own row still owns. The password is generated once, stored as a
 * secret attribute and never shown by the API.
 */
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { ResourceActionError, type ResourceContext, type ResourceState, type ResourceType } from '../types'

const ident = (s: string) => `"${s.replace(/"/g, '""')}"`
const literal = (s: string) => `'${s.replace(/'/g, "''")}'`

/** PostgreSQL names: lower case, at most 63 bytes. */
function defaultName(ctx: ResourceContext): string {
  const base = `kiln_${ctx.stackName}_${ctx.resourceName}`.toLowerCase().replace(/[^a-z0-9_]/g, '_').slice(0, 50)
  return `${base}_${ctx.stackId.replace(/-/g, '').slice(0, 8)}`
}

async function withClient<T>(ctx: ResourceContext, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const url = ctx.config.targetDatabaseUrl
  if (!url) throw new ResourceActionError('no target PostgreSQL server is configured (KILN_TARGET_DATABASE_URL)')
  ctx.signal.throwIfAborted()
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 })
  // An abort ends the connection, which makes a running statement fail at once.
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

async function ownerOf(c: pg.Client, db: string): Promise<{ exists: boolean; stackId?: string; resource?: string; uuid?: string }> {
  const r = await c.query<{ comment: string | null }>(
    `SELECT shobj_description(d.oid, 'pg_database') AS comment FROM pg_database d WHERE d.datname = $1`,
    [db],
  )
  if (!r.rowCount) return { exists: false }
  const m = /^kiln:([^:]+):(.+):([0-9a-f-]{36})$/.exec(r.rows[0]!.comment ?? '')
  return m ? { exists: true, stackId: m[1]!, resource: m[2]!, uuid: m[3]! } : { exists: true }
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
  const db = typeof props.name === 'string' && props.name ? props.name : defaultName(ctx)
  const role = db
  const password = (prev?.attributes.password as string | undefined) ?? randomBytes(18).toString('base64url')
  const limit = Number(props.connection_limit ?? -1)
  await withClient(ctx, async (c) => {
    const owner = await ownerOf(c, db)
    if (owner.exists && (owner.stackId !== ctx.stackId || owner.resource !== ctx.resourceName)) {
      throw new ResourceActionError(`database ${db} already exists and is not managed by this resource`)
    }
    const roleExists = (await c.query(`SELECT 1 FROM pg_roles WHERE rolname = $1`, [role])).rowCount
    if (roleExists) await c.query(`ALTER ROLE ${ident(role)} WITH LOGIN PASSWORD ${literal(password)}`)
    else await c.query(`CREATE ROLE ${ident(role)} WITH LOGIN PASSWORD ${literal(password)}`)
    if (!owner.exists) await c.query(`CREATE DATABASE ${ident(db)} OWNER ${ident(role)} CONNECTION LIMIT ${limit}`)
    else await c.query(`ALTER DATABASE ${ident(db)} WITH CONNECTION LIMIT ${limit}`)
    await c.query(`COMMENT ON DATABASE ${ident(db)} IS ${literal(`kiln:${ctx.stackId}:${ctx.resourceName}:${ctx.resourceUuid}`)}`)
  })
  return {
    physicalId: db,
    attributes: { database: db, role, password, url: urlFor(ctx.config.targetDatabaseUrl!, db, role, password) },
  }
}

export const postgresDatabaseResource: ResourceType = {
  name: 'Kiln::Postgres::Database',
  description: 'A PostgreSQL database and a login role owning it, on the configured target server.',
  properties: {
    name: {
      type: 'string',
      description: 'Database (and role) name; default derived from the stack and resource names. A change replaces the database.',
      constraints: [{ allowed_pattern: '[a-z_][a-z0-9_]*', description: 'lower-case letters, digits and _' }, { length: { max: 63 } }],
    },
    connection_limit: { type: 'integer', default: -1, updateAllowed: true, constraints: [{ range: { min: -1 } }], description: 'Maximum concurrent connections (-1: no limit).' },
  },
  attributes: {
    database: { description: 'Database name.', type: 'string' },
    role: { description: 'Login role that owns the database.', type: 'string' },
    password: { description: "The role's password.", type: 'string', secret: true },
    url: { description: 'Connection URL for the role (contains the password).', type: 'string', secret: true },
  },
  create: (ctx, props) => ensure(ctx, props),
  update: (ctx, props, prev) => ensure(ctx, props, prev),
  async delete(ctx, state) {
    const db = state.physicalId ?? (state.attributes.database as string | undefined)
    if (!db) return
    await withClient(ctx, async (c) => {
      const owner = await ownerOf(c, db)
      if (!owner.exists || owner.uuid !== ctx.resourceUuid) return // gone, or a successor owns it now
      await c.query(`DROP DATABASE IF EXISTS ${ident(db)} WITH (FORCE)`)
      await c.query(`DROP ROLE IF EXISTS ${ident(db)}`)
    })
  },
  async check(ctx, state) {
    const db = state.physicalId
    if (!db) throw new ResourceActionError('the database was never created')
    await withClient(ctx, async (c) => {
      if (!(await ownerOf(c, db)).exists) throw new ResourceActionError(`database ${db} no longer exists`)
    })
  },
}
