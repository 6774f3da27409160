/**
 * A small scoped logger. Every line carries its scope (worker, stack,
 * traversal, resource) so one traversal can be followed with grep:
 *
 *   2026-11-22T10:00:00.123Z INFO  [worker=3f2a stack=web trav=9c1d res=db#12] created in 0.21s
 *
 * Values under keys that look secret are redacted.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent'
export type LogScope = Record<string, string | number | boolean | null | undefined>

const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 }
const SECRET_KEY = /pass(word)?|secret|token|authorization|cookie|credential/i

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void
  info(msg: string, fields?: Record<string, unknown>): void
  warn(msg: string, fields?: Record<string, unknown>): void
  error(msg: string, fields?: Record<string, unknown>): void
  scope(extra: LogScope): Logger
}

export interface LoggerOptions {
  level?: LogLevel
  format?: 'text' | 'json'
  /** Where lines go (default: stderr for warn/error, stdout otherwise). */
  sink?: (line: string, level: LogLevel) => void
}

export function redact(fields: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(fields)) out[k] = SECRET_KEY.test(k) ? '[redacted]' : v
  return out
}

function defaultSink(line: string, level: LogLevel) {
  if (level === 'warn' || level === 'error') process.stderr.write(line + '\n')
  else process.stdout.write(line + '\n')
}

export function createLogger(opts: LoggerOptions = {}, scope: LogScope = {}): Logger {
  const min = ORDER[opts.level ?? 'info']
  const sink = opts.sink ?? defaultSink
  const format = opts.format ?? 'text'
  const emit = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (ORDER[level] < min) return
    const safe = fields ? redact(fields) : undefined
    if (format === 'json') {
      sink(JSON.stringify({ ts: new Date().toISOString(), level, ...redact(scope), msg, ...safe }), level)
      return
    }
    const scopeText = Object.entries(scope)
      .filter(([, v]) => v !== undefined && v !== null && v !== '')
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')
    const extra = safe && Object.keys(safe).length ? ' ' + JSON.stringify(safe) : ''
    sink(`${new Date().toISOString()} ${level.toUpperCase().padEnd(5)} ${scopeText ? `[${scopeText}] ` : ''}${msg}${extra}`, level)
  }
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    scope: (extra) => createLogger(opts, { ...scope, ...extra }),
  }
}

/** A logger that drops everything (tests, library defaults). */
export const silentLogger: Logger = createLogger({ level: 'silent' })
