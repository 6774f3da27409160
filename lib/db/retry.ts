/**
 * Retrying database calls that failed for a reason that will pass: a deadlock
 * or serialisation failure, or a lost connection (the server restarted).
 * Engine calls are safe to retry: each is one transaction, and the job row
 * tells a retry whether the first attempt committed (see kiln_finish_node).
 */
const RETRYABLE_SQLSTATE = new Set([
  '40001', // serialization_failure
  '40P01', // deadlock_detected
  '57P01', // admin_shutdown (server restarting)
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up)
  '08000', '08003', '08006', '08001', '08004', // connection exceptions
  '53300', // too_many_connections
])

const RETRYABLE_NODE = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN'])

export function isRetryable(err: unknown): boolean {
  const e = err as { code?: string; message?: string; cause?: unknown } | null
  if (!e) return false
  // A wrapper (MigrationError) keeps the driver's error as its cause.
  if (e.cause !== undefined && e.cause !== err && isRetryable(e.cause)) return true
  if (e.code && (RETRYABLE_SQLSTATE.has(e.code) || RETRYABLE_NODE.has(e.code))) return true
  const msg = e.message ?? ''
  // The text of a SQLSTATE above, for errors that carry only a message (Prisma's schema engine,
  // which runs migrations: "Can't reach database server" is its P1001).
  return /Connection terminated|connection timeout|Client has encountered a connection error|the database system is (starting up|shutting down|in recovery mode)|terminating connection due to administrator command|Can't reach database server|Server has closed the connection|ECONNREFUSED|ECONNRESET/i.test(msg)
}

export interface RetryOptions {
  /** Give up after this long (default 60 s: longer than a database restart). */
  maxMs?: number
  minDelayMs?: number
  maxDelayMs?: number
  onRetry?: (err: unknown, attempt: number, delayMs: number) => void
  signal?: AbortSignal
}

export function delayFor(attempt: number, min: number, max: number): number {
  const exp = Math.min(max, min * 2 ** attempt)
  return Math.round(exp / 2 + Math.random() * (exp / 2))
}

export async function withRetry<T>(fn: () => Promise<T>, opts: RetryOptions = {}): Promise<T> {
  const start = Date.now()
  const maxMs = opts.maxMs ?? 60_000
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn()
    } catch (err) {
      if (!isRetryable(err) || Date.now() - start > maxMs || opts.signal?.aborted) throw err
      const delay = delayFor(attempt, opts.minDelayMs ?? 20, opts.maxDelayMs ?? 2000)
      opts.onRetry?.(err, attempt, delay)
      await new Promise((r) => setTimeout(r, delay))
    }
  }
}
