/**
 * Who may connect to Kiln's own database. PostgreSQL grants CONNECT (and
 * TEMPORARY) on every new database to PUBLIC, so any role of the server could
 * log in to Kiln's database — including the login roles Kiln::Postgres::Database
 * makes for tenants on that server, which would then LISTEN to every
 * project's events, NOTIFY kiln_abort, hold Kiln's advisory locks and use up
 * its connections. Every worker revokes it at start (a test database cloned
 * from a template gets PUBLIC's grant back, so a one-time migration would not
 * do). Kiln's own connections keep working: the owner keeps its own grant,
 * and a superuser needs none.
 */
import { openClient } from './own-client'

const quoted = (s: string) => `"${s.replace(/"/g, '""')}"`

/**
 * Revoke CONNECT and TEMPORARY on the database of `url` from PUBLIC, as far
 * as the connecting user may. Returns null when PUBLIC can no longer connect,
 * else a line telling the operator what to run (the user is neither owner nor
 * superuser).
 */
export async function restrictDatabaseAccess(url: string): Promise<string | null> {
  const c = await openClient({ connectionString: url, application_name: 'kiln-bootstrap' })
  try {
    const { rows: [db] } = await c.query<{ name: string; user: string }>(`SELECT current_database() AS name, current_user AS user`)
    // Without the privilege this is a warning, not an error; whether it took is read back below.
    await c.query(`REVOKE CONNECT, TEMPORARY ON DATABASE ${quoted(db!.name)} FROM PUBLIC`).catch(() => {})
    const { rows } = await c.query<{ open: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM pg_database d, aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a
                       WHERE d.datname = current_database() AND a.grantee = 0 AND a.privilege_type = 'CONNECT') AS open`,
    )
    if (!rows[0]!.open) return null
    return (
      `every role of the server may connect to Kiln's database ${db!.name} (CONNECT is granted to PUBLIC), and ${db!.user} may not revoke it; ` +
      `as its owner or a superuser, run: REVOKE CONNECT, TEMPORARY ON DATABASE ${quoted(db!.name)} FROM PUBLIC; GRANT CONNECT ON DATABASE ${quoted(db!.name)} TO ${quoted(db!.user)};`
    )
  } finally {
    await c.end().catch(() => {})
  }
}
