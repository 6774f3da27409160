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
  NODE_ENV: z.enum(['development', 'production', 'test']).optional(),
  /** Use this PostgreSQL server instead of the embedded one. */
  DATABASE_URL: optionalUrl,
  /** Tests: use this server (a database per test file is created on it). */
  TEST_DATABASE_URL: optionalUrl,
  PORT: int(3000),
  HOST: z.string().trim().min(1).optional().default('127.0.0.1'),
  /** Worker processes `npm start` launches. */
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
  /** Directory the `Kiln::File` resource type writes into. Default `<data dir>/workspace`. */
  KILN_WORKSPACE_DIR: z.string().trim().min(1).optional(),
  /** Server on which `Kiln::Postgres::Database` creates databases and roles. Default: DATABASE_URL. */
  KILN_TARGET_DATABASE_URL: optionalUrl,
  /** A resource lock's lease; a lock whose lease ran out (owner stopped heartbeating) is broken. */
  KILN_LEASE_MS: int(15_000),
  KILN_HEARTBEAT_MS: int(0),
  /** Resource actions one worker process runs at once (its database calls share at most 8 connections). */
  KILN_WORKER_CONCURRENCY: int(64),
  /** After SIGTERM, how long in-flight actions may run before they are aborted. */
  KILN_SHUTDOWN_ABORT_MS: int(30_000),
  /** Let a worker run a successor it just made ready without a queue hop. */
  KILN_INLINE_CONTINUATION: bool(true),
  /**
   * A node step that touches only state-only resources (OS::Heat::TestResource, None, Value,
   * RandomString) commits without waiting for the disk; false: every step waits (README, "Durability").
   */
  KILN_LAZY_COMMITS: bool(true),
  KILN_LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).optional().default('info'),
  KILN_LOG_FORMAT: z.enum(['text', 'json']).optional().default('text'),
  /** Size limits (enforced with a 4xx naming the limit). */
  KILN_MAX_TEMPLATE_BYTES: int(1_048_576),
  KILN_MAX_RESOURCES_PER_STACK: int(20_000),
  KILN_MAX_BODY_BYTES: int(4_194_304),
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
  /** Mark the session cookie `Secure` (serve Kiln behind https). */
  KILN_SECURE_COOKIES: bool(false),
  /** CLI: the Kiln server and the API token to use (flags --url / --token override). */
  KILN_URL: z.string().trim().url().optional(),
  KILN_TOKEN: z.string().trim().optional(),
  /** Tests: fail (rather than skip) the heatclient / browser suites when their tools are missing (CI sets these). */
  KILN_REQUIRE_HEATCLIENT: bool(false),
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

export type Env = z.infer<typeof EnvSchema> & { heartbeatMs: number }

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
  return { ...e, heartbeatMs: e.KILN_HEARTBEAT_MS || Math.max(200, Math.floor(e.KILN_LEASE_MS / 3)) }
}

let cached: Env | undefined
/** This process's environment, parsed once. */
export function env(): Env {
  cached ??= parseEnv()
  return cached
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
