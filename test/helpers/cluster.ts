/**
 * A real Kiln back end for tests: worker *processes* (spawned like
 * `npm run worker`) against a test database, and the service layer in the
 * test process. Waits are woken by NOTIFY kiln_events, not by polling.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { childEnv } from '../../lib/env'
import { createDb, type Db } from '../../lib/db/client'
import { ALL_STACKS, HARNESS_WATCH_MS, watchStackEvents } from '../../lib/db/queries/watch'
import { builtinTypes, createRegistry, typeCatalog, type BuiltinOptions } from '../../lib/resources/registry'
import { loadTypePackages } from '../../lib/resources/packages'
import { createStackService, type Actor, type StackService } from '../../lib/services/stacks'

export interface ClusterOptions {
  workers: number
  leaseMs?: number
  concurrency?: number
  env?: Record<string, string>
}

export interface WorkerProc {
  proc: ChildProcess
  id: string | null
  output: string[]
}

export class TestCluster {
  readonly workers: WorkerProc[] = []
  readonly workspace: string
  private listener: pg.Client | null = null
  private waiters = new Set<() => void>()

  private constructor(
    readonly url: string,
    readonly db: Db,
    readonly services: StackService,
    readonly actor: Actor,
    private readonly opts: ClusterOptions,
    /** What the built-in types take from the workers' environment (Kiln::Exec's allow-list): the API server builds its types alike. */
    readonly builtin: BuiltinOptions,
  ) {
    this.workspace = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-ws-'))
  }

  static async start(url: string, opts: ClusterOptions): Promise<TestCluster> {
    const db = createDb(url, { max: 6 })
    const builtin = { ...builtinOptionsOf(opts.env), packages: await loadTypePackages((opts.env?.KILN_TYPE_PACKAGES ?? '').split(',').filter(Boolean)) }
    const registry = createRegistry(builtinTypes(builtin))
    const services = createStackService({ db, catalog: typeCatalog(registry), types: registry, limits: { maxTemplateBytes: 1 << 22, maxResourcesPerStack: 10_000 }, defaultTimeoutMins: 30 })
    const { rows } = await db.pool.query(`INSERT INTO project (name) VALUES ($1) RETURNING id`, [`t-${crypto.randomBytes(4).toString('hex')}`])
    const c = new TestCluster(url, db, services, { projectId: rows[0].id, name: 'test' }, opts, builtin)
    await c.listenForEvents()
    for (let i = 0; i < opts.workers; i++) c.spawnWorker()
    await c.waitFor(async () => (await c.liveWorkers()) >= opts.workers, 30_000, 'workers to register')
    return c
  }

  /** LISTEN kiln_events; when the connection drops (a chaos test restarts PostgreSQL), reconnect. */
  private async listenForEvents(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url })
    const lost = () => {
      if (this.listener !== client) return
      this.listener = null
      client.end().catch(() => {})
      this.notify() // waiters re-check now (and every recheckMs) rather than wait for a notification
      const retry = () => void this.listenForEvents().catch(() => setTimeout(retry, 250))
      if (!this.stopping) setTimeout(retry, 250)
    }
    client.on('error', lost)
    client.on('end', lost)
    client.on('notification', () => this.notify())
    this.listener = client
    await client.connect()
    await client.query('LISTEN kiln_events')
    // Steps notify only for watched stacks: this harness follows them all (for its life, at most a day).
    await watchStackEvents(client, this.watcher, [ALL_STACKS], HARNESS_WATCH_MS)
  }

  private stopping = false
  /** Its all-stacks watch (see listenForEvents). */
  readonly watcher = crypto.randomUUID()

  private notify() {
    for (const w of this.waiters) w()
  }

  /** Start one more worker process (`env`: variables for this one only, over the cluster's). */
  spawnWorker(env: Record<string, string> = {}): WorkerProc {
    const w: WorkerProc = { proc: null as unknown as ChildProcess, id: null, output: [] }
    w.proc = spawn(process.execPath, ['--import', 'tsx', 'worker/main.ts'], {
      env: childEnv({
        DATABASE_URL: this.url,
        KILN_LEASE_MS: String(this.opts.leaseMs ?? 2000),
        KILN_WORKER_CONCURRENCY: String(this.opts.concurrency ?? 16),
        KILN_WORKSPACE_DIR: this.workspace,
        KILN_LOG_LEVEL: 'warn',
        KILN_SHUTDOWN_ABORT_MS: '5000',
        ...this.opts.env,
        ...env,
      }),
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    })
    w.proc.stdout?.on('data', (d: Buffer) => w.output.push(d.toString()))
    w.proc.stderr?.on('data', (d: Buffer) => w.output.push(d.toString()))
    w.proc.on('message', (m: { kind?: string; worker?: string }) => {
      if (m.kind === 'ready') w.id = m.worker ?? null
    })
    this.workers.push(w)
    return w
  }

  async liveWorkers(): Promise<number> {
    const { rows } = await this.db.pool.query(`SELECT count(*)::int AS n FROM worker WHERE stopped_at IS NULL AND state <> 'dead'`)
    return rows[0].n
  }

  /** Wait until `cond` holds, re-checking on every event notification (and at least every `recheckMs`). */
  async waitFor(cond: () => Promise<boolean>, timeoutMs: number, what: string, recheckMs = 500): Promise<void> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      let wake!: () => void
      const woke = new Promise<void>((r) => (wake = r))
      this.waiters.add(wake)
      try {
        if (await cond()) return
        if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
        await Promise.race([woke, new Promise((r) => setTimeout(r, recheckMs))])
      } finally {
        this.waiters.delete(wake)
      }
    }
  }

  async stack(id: string): Promise<{ action: string; status: string; statusReason: string; currentTraversalId: string | null }> {
    const { rows } = await this.db.pool.query('SELECT action, status, status_reason, current_traversal_id FROM stack WHERE id = $1', [id])
    return { action: rows[0].action, status: rows[0].status, statusReason: rows[0].status_reason, currentTraversalId: rows[0].current_traversal_id }
  }

  /** Wait for the stack to leave IN_PROGRESS; returns `<ACTION>_<STATUS>`. */
  async settle(stackId: string, timeoutMs = 60_000): Promise<string> {
    let state = ''
    await this.waitFor(
      async () => {
        const s = await this.stack(stackId)
        state = `${s.action}_${s.status}`
        return s.status !== 'IN_PROGRESS'
      },
      timeoutMs,
      `stack ${stackId} to settle`,
    ).catch(async (err: Error) => {
      throw new Error(`${err.message}\n${await this.dump(stackId)}`)
    })
    return state
  }

  /** Rows, sync points, jobs and worker output, for a failure message. */
  async dump(stackId: string): Promise<string> {
    const q = async (sql: string) => (await this.db.pool.query(sql, [stackId])).rows.map((r) => JSON.stringify(r)).join('\n')
    return [
      '--- stack', await q('SELECT action, status, status_reason, current_traversal_id FROM stack WHERE id = $1'),
      '--- resources', await q('SELECT id, name, action, status, status_reason, engine_id, lock_traversal_id, waiter_traversal_id, replaces, replaced_by FROM resource WHERE stack_id = $1 ORDER BY id'),
      '--- sync points', await q('SELECT sp.traversal_id, sp.resource_id, sp.is_update, sp.state, sp.satisfied, sp.required FROM sync_point sp JOIN traversal t ON t.id = sp.traversal_id WHERE t.stack_id = $1 ORDER BY sp.traversal_id, sp.resource_id'),
      '--- jobs', await q('SELECT id, kind, traversal_id, resource_id, is_update, locked_by, run_at FROM job WHERE stack_id = $1'),
      '--- worker output', this.workers.map((w) => w.output.join('')).join('\n').slice(-4000),
    ].join('\n')
  }

  async rows(stackId: string) {
    const { rows } = await this.db.pool.query(
      `SELECT id, name, action, status, status_reason, properties, physical_id, engine_id, replaces, replaced_by FROM resource WHERE stack_id = $1 ORDER BY id`,
      [stackId],
    )
    return rows as { id: number; name: string; action: string; status: string; status_reason: string; properties: Record<string, unknown> | null; physical_id: string | null; engine_id: string | null }[]
  }

  /** The workspace of a project (default: this cluster's own), where its Kiln::File resources write. */
  projectWorkspace(projectId = this.actor.projectId): string {
    return path.join(this.workspace, projectId)
  }

  /** Files the Kiln::File type wrote in a project's workspace (default: this cluster's project), relative to it. */
  workspaceFiles(projectId = this.actor.projectId): string[] {
    const root = this.projectWorkspace(projectId)
    const out: string[] = []
    const walk = (d: string) => {
      for (const f of fs.readdirSync(d, { withFileTypes: true })) {
        const p = path.join(d, f.name)
        if (f.isDirectory()) walk(p)
        else out.push(path.relative(root, p))
      }
    }
    if (fs.existsSync(root)) walk(root)
    return out.sort()
  }

  async stop() {
    this.stopping = true
    for (const w of this.workers) if (w.proc.exitCode === null && w.proc.signalCode === null) w.proc.kill('SIGTERM')
    await Promise.all(this.workers.map((w) => (w.proc.exitCode === null && w.proc.signalCode === null ? new Promise((r) => w.proc.once('exit', r)) : null)))
    await this.listener?.end().catch(() => {})
    await this.db.close()
    fs.rmSync(this.workspace, { recursive: true, force: true })
  }
}

/** The built-in types' options the workers read from `env` (KILN_EXEC_COMMANDS), for the test process's own registry. */
function builtinOptionsOf(env: Record<string, string> = {}): BuiltinOptions {
  return { exec: { commands: (env.KILN_EXEC_COMMANDS ?? '').split(',').map((s) => s.trim()).filter(Boolean) } }
}
