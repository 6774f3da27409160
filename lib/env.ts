/**
 * The one place that reads `process.env`.
 *
 * Every process (launcher, web server, worker, CLI, tests) calls `env()` once
 * and passes the values it needs down as plain options, so nothing else in the
 * code base depends on the environment. Bad values fail at boot with a message
 * naming the variable, rather than later at first use.
 */
import { z } from 'zod'

const int = (def: number) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, 'must be a non-negative integer')
    .transform(Number)
    .optional()
    .transform((v) => v ?? def)

const bool = (def: boolean) =>
  z
    .enum(['1', '0', 'true', 'false', 'yes', 'no', ''])
    .optional()
    .transform((v) => (v === undefined || v === '' ? def : ['1', 'true', 'yes'].includes(v)))

const url = z
  .string()
  .trim()
  .refine((v) => /^postgres(ql)?:\/\//.test(v), 'must be a postgres:// or postgresql:// URL')

const optionalUrl = z
  .string()
  .trim()
  .optional()
  .transform((v) => (v ? v : undefined))
  .pipe(url.optional())

const EnvSchema = z.object({
  /** `production` under `npm start`; anything else runs the UI in Next's development mode. */
  NODE_ENV: z.enum(['development', 'production', 'test']).optional(),
  /** Use this PostgreSQL server instead of the embedded one. */
  DATABASE_URL: optionalUrl,
  /** Tests: use this server (a database per test file is created on it). */
  TEST_DATABASE_URL: optionalUrl,
  /** Port of the web server (UI, API and Socket.IO); 0 picks a free one. */
  PORT: int(3000),
  /** Address the web server binds to (0.0.0.0: every interface). */
  HOST: z.string().trim().min(1).optional().default('127.0.0.1'),
  /**
   * Worker processes `npm start` launches. Kiln also counts this many workers (each with its pool) in the
   * connections it keeps for itself on the database server: where workers run on other machines too, set it
   * to their total, on every process.
   */
  WORKERS: int(2),
  /** Where the embedded PostgreSQL cluster, credentials and the workspace live. */
  KILN_DATA_DIR: z.string().trim().min(1).optional().default('.data'),
  /** Port of the embedded PostgreSQL; by default the last one used, or the first free from 55440. */
  EMBEDDED_PG_PORT: z
    .string()
    .regex(/^\d+$/)
    .transform(Number)
    .optional(),
  /** Fixes the admin login token instead of generating one on first start (scripts, CI). */
  KILN_ADMIN_TOKEN: z.string().trim().min(16, 'must be at least 16 characters').optional(),
  /** Directory under which `Kiln::File` gives each project a workspace (`<dir>/<project id>/`). Default `<data dir>/workspace`. */
  KILN_WORKSPACE_DIR: z.string().trim().min(1).optional(),
  /** Bytes of files one project's `Kiln::File` workspace may hold, all files together (default 64 MiB). */
  KILN_WORKSPACE_QUOTA_BYTES: int(64 * 1024 * 1024),
  /**
   * The programs `Kiln::Exec` may run, comma-separated, each exactly as templates write a command's first
   * item (`/bin/sh,/usr/bin/python3`). Unset or empty: Kiln::Exec is off. It runs them on the worker's
   * machine as the worker's user: name only programs you would let every project run there.
   */
  KILN_EXEC_COMMANDS: z
    .string()
    .optional()
    .transform((v) => (v ?? '').split(',').map((s) => s.trim()).filter(Boolean)),
  /**
   * Type packages to load at start, comma-separated: npm package names, or paths starting with `.` or `/`
   * (docs/guide/resource-types.md#type-packages). The web server and every worker must name the same ones.
   */
  KILN_TYPE_PACKAGES: z
    .string()
    .optional()
    .transform((v) => (v ?? '').split(',').map((s) => s.trim()).filter(Boolean)),
  /**
   * How long Kiln waits for one answer of an HTTP resource provider before it retries (5 attempts in all,
   * with back-off). A long operation answers 202 at once and is not bound by this.
   */
  KILN_PROVIDER_TIMEOUT_MS: int(30_000).refine((v) => v >= 100, 'must be at least 100 (milliseconds)'),
  /** Server on which `Kiln::Postgres::Database` creates databases and roles. Default: DATABASE_URL. */
  KILN_TARGET_DATABASE_URL: optionalUrl,
  /**
   * Connections each tenant login role made by `Kiln::Postgres::Database` may hold at once (a database's
   * `connection_limit`, when lower, lowers its role's too).
   */
  KILN_TENANT_CONNECTION_LIMIT: int(20),
  /**
   * Connections one project's tenant roles may hold together (the sum of their limits), checked when a role
   * is made or its limit raised. All projects together get what the target server has left beside Kiln's own.
   */
  KILN_PROJECT_CONNECTION_LIMIT: int(100),
  /** `Kiln::Postgres::Database` databases one project may have on the target server (snapshots not counted). */
  KILN_PROJECT_MAX_DATABASES: int(20),
  /** Snapshots (deletion_policy: Snapshot) one project may keep on the target server. */
  KILN_PROJECT_MAX_SNAPSHOTS: int(10),
  /**
   * Bytes one project's databases and snapshots may take together on the target server (default 1 GiB),
   * checked against their sizes when a database is made or restored and when a snapshot is taken.
   */
  KILN_PROJECT_DATABASE_QUOTA_BYTES: int(1024 * 1024 * 1024),
  /** A resource lock's lease; a lock whose lease ran out (owner stopped heartbeating) is broken. */
  KILN_LEASE_MS: int(15_000),
  /** How often a worker renews its locks' leases; 0: a third of KILN_LEASE_MS (at least 200 ms). */
  KILN_HEARTBEAT_MS: int(0),
  /**
   * A worker claims anyway after this long without a job notification or a claim: the safety net
   * that makes a lost LISTEN (a half-open connection) cost seconds instead of a stall. Idle, it costs
   * one claim of an empty queue per period. At least 100 ms, so that it never becomes a busy poll.
   */
  KILN_IDLE_CLAIM_MS: int(5000).refine((v) => v >= 100, 'must be at least 100 (milliseconds)'),
  /**
   * A worker serves `GET /metrics` (Prometheus) on this port, on HOST; 0: off. `npm start` gives its
   * second worker this port + 1, and so on.
   */
  KILN_WORKER_METRICS_PORT: int(0),
  /** Resource actions one worker process runs at once (its database calls share at most 8 connections). */
  KILN_WORKER_CONCURRENCY: int(64),
  /**
   * The share of a worker's slots one project may hold at once, in percent (at least one slot): the
   * rest stays free for the other projects' work. 100: no cap.
   */
  KILN_PROJECT_SLOT_SHARE: int(75).refine((v) => v >= 1 && v <= 100, 'must be a percentage from 1 to 100'),
  /** After SIGTERM, how long in-flight actions may run before they are aborted. */
  KILN_SHUTDOWN_ABORT_MS: int(30_000),
  /** Let a worker run a successor it just made ready without a queue hop. */
  KILN_INLINE_CONTINUATION: bool(true),
  /**
   * A node step that touches only state-only resources (OS::Heat::TestResource, None, Value,
   * RandomString) commits without waiting for the disk; false: every step waits (docs/design/durability.md).
   */
  KILN_LAZY_COMMITS: bool(true),
  /** Least severe log level written (`debug` also logs every API request's method, path, status and time). */
  KILN_LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).optional().default('info'),
  /** `text`: one line per entry with its scope; `json`: one JSON object per line. */
  KILN_LOG_FORMAT: z.enum(['text', 'json']).optional().default('text'),
  /** Largest template accepted, in bytes (413 naming the limit). */
  KILN_MAX_TEMPLATE_BYTES: int(1_048_576),
  /** Most resources a stack may define (413 naming the limit). */
  KILN_MAX_RESOURCES_PER_STACK: int(20_000),
  /** Largest request body, declared or sent chunked, on every route (413). */
  KILN_MAX_BODY_BYTES: int(4_194_304),
  /** Most resources with external_id one import preview looks at (413 naming the limit). */
  KILN_MAX_IMPORT_PREVIEW_ITEMS: int(100).refine((v) => v >= 1, 'must be at least 1'),
  /** Import previews one project may ask for per minute (per web process) before it is answered 429 with Retry-After. */
  KILN_IMPORT_PREVIEWS_PER_MINUTE: int(10).refine((v) => v >= 1, 'must be at least 1'),
  /** Events kept per stack; workers prune the oldest once a minute, and the rest stays gap-free. */
  KILN_MAX_EVENTS_PER_STACK: int(1_000_000),
  /**
   * Template evaluation budgets (lib/template/budget.ts): a template that needs more is refused
   * with a 400 naming the setting (at submit), or its resource fails with that reason (at run time).
   * Operations: one per template node visited, list item or map key handled, pattern step.
   */
  KILN_TEMPLATE_EVAL_MAX_OPS: int(1_000_000),
  /** Bytes of JSON an evaluation may produce (a value referenced n times counts n times). */
  KILN_TEMPLATE_EVAL_MAX_OUTPUT_BYTES: int(8_388_608),
  /** How deeply a template, an environment or a json parameter may nest. */
  KILN_TEMPLATE_EVAL_MAX_DEPTH: int(100),
  /** Wall-clock limit of one evaluation on an evaluation thread (parsing included). */
  KILN_TEMPLATE_EVAL_TIMEOUT_MS: int(10_000),
  /**
   * Operations an evaluation may do on the calling thread (plus 4 per node of what it evaluates)
   * before it is run again on an evaluation thread under the full budget.
   */
  KILN_TEMPLATE_EVAL_INLINE_OPS: int(20_000),
  /** Evaluation threads per process (started when first needed). */
  KILN_TEMPLATE_EVAL_THREADS: int(2),
  /** Stack timeout when a request does not give one (minutes). */
  KILN_DEFAULT_TIMEOUT_MINS: int(60),
  /** How long a saved plan can be applied after it was computed (ms; default 24 h). */
  KILN_PLAN_TTL_MS: int(86_400_000),
  /** Mark the session cookie `Secure` (serve Kiln behind https). */
  KILN_SECURE_COOKIES: bool(false),
  /**
   * The URL clients reach Kiln at: Heat's redirects and links name it (never the request's Host header).
   * Default: http://<HOST>:<port bound> (127.0.0.1 for HOST=0.0.0.0); set it when clients use another name.
   */
  KILN_PUBLIC_URL: z
    .string()
    .trim()
    .url()
    .refine((v) => /^https?:\/\/[^/?#]+(\/[^?#]*)?$/i.test(v), 'must be an http:// or https:// URL without a query or fragment')
    .transform((v) => v.replace(/\/+$/, ''))
    .optional(),
  /** Failed credential attempts a client address may make per minute (per web process) before it is answered 429. */
  KILN_AUTH_FAILURES_PER_MINUTE: int(30).refine((v) => v >= 1, 'must be at least 1'),
  /**
   * Messages one Socket.IO connection may send per minute (every event counts); more are refused
   * (the ack says `rate limited`), and a connection that sends twice as many within the minute is closed.
   */
  KILN_SOCKET_MESSAGES_PER_MINUTE: int(600).refine((v) => v >= 1, 'must be at least 1'),
  /** CLI: the Kiln server to talk to (`--url` overrides); default http://127.0.0.1:3000. */
  KILN_URL: z.string().trim().url().optional(),
  /** CLI: the API token to send (`--token` overrides). */
  KILN_TOKEN: z.string().trim().optional(),
  /** Tests: fail (rather than skip) the `openstack` client suite when the command is missing (CI sets it). */
  KILN_REQUIRE_HEATCLIENT: bool(false),
  /** Tests: fail (rather than skip) the browser suite when Chromium is missing (CI sets it). */
  KILN_REQUIRE_BROWSER: bool(false),
  /** Tests: runs per fast-check property in test/reliability/fuzz.test.ts (the long version: 2000). */
  KILN_FUZZ_RUNS: int(150),
  /** Tests: the Chromium binary the browser suite drives (default: `chromium` or `chromium-browser` on PATH). */
  KILN_CHROMIUM_PATH: z.string().trim().min(1).optional(),
  /** Used to find Chromium on PATH. */
  PATH: z.string().optional(),
  /** Set by the launcher for the processes it starts. */
  KILN_CHILD: bool(false),
})

export type Env = z.infer<typeof EnvSchema> & { heartbeatMs: number; projectSlotCap: number }

export class EnvError extends Error {
  override name = 'EnvError'
}

/** Parse an environment (default: this process's). Throws EnvError naming each bad variable. */
export function parseEnv(source: Record<string, string | undefined> = process.env): Env {
  const parsed = EnvSchema.safeParse(source)
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`)
    throw new EnvError(`invalid environment:\n${lines.join('\n')}`)
  }
  const e = parsed.data
  return {
    ...e,
    heartbeatMs: e.KILN_HEARTBEAT_MS || Math.max(200, Math.floor(e.KILN_LEASE_MS / 3)),
    projectSlotCap: Math.max(1, Math.floor((e.KILN_WORKER_CONCURRENCY * e.KILN_PROJECT_SLOT_SHARE) / 100)),
  }
}

let cached: Env | undefined
/** This process's environment, parsed once. */
export function env(): Env {
  cached ??= parseEnv()
  return cached
}

/** Where a command Kiln runs for a tenant (Kiln::Exec) finds its programs: this process's PATH, and nothing else of its environment. */
export function commandSearchPath(): string {
  return process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin'
}

/** The environment for a child process: this process's plus overrides (undefined removes). */
export function childEnv(overrides: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...process.env }
  for (const [k, v] of Object.entries(overrides)) {
    if (v === undefined) delete out[k]
    else out[k] = v
  }
  return out
}
