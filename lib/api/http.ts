/**
 * A small framework-free HTTP layer for the API: Web-standard Request in,
 * Response out, so the same handlers run under the custom server, in tests
 * and anywhere else. Routes are matched by method and a path pattern
 * (`/api/stacks/:stack`); errors become JSON bodies with the right status,
 * and nothing a client sends can produce a 500 (anything unexpected is logged
 * and answered as a generic 500 without details).
 */
import { z } from 'zod'
import { DomainError, LimitError, ValidationError } from '../plan/errors'

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
    /** Response headers that go with this error (Allow, Retry-After). */
    readonly headers: Record<string, string> = {},
  ) {
    super(message)
  }
}

/** The client's address ran out of failed credential attempts (lib/auth/failed-attempts.ts). */
export const tooManyAttempts = (retryAfter: number) =>
  new HttpError(429, 'too_many_requests', `too many failed authentication attempts from this address; retry in ${retryAfter} s`, { retryAfter }, { 'retry-after': String(retryAfter) })

/** A project ran out of a per-project request limit (./project-rate.ts). */
export const tooManyRequests = (message: string, retryAfter: number) => new HttpError(429, 'too_many_requests', message, { retryAfter }, { 'retry-after': String(retryAfter) })

/** Who sent a request, as the HTTP server saw it (a Request does not carry it). */
export interface ClientInfo {
  /** The peer's IP address. */
  address?: string
}

/** The session cookie's value; null when absent or not decodable (a forged or mangled cookie is no credential). */
export function sessionCookie(req: Request): string | null {
  const raw = /(?:^|;\s*)kiln_session=([^;]+)/.exec(req.headers.get('cookie') ?? '')?.[1]
  if (!raw) return null
  try {
    return decodeURIComponent(raw)
  } catch {
    return null
  }
}

export const unauthorized = (why = 'authentication required: send X-Auth-Token, Authorization: Bearer <token>, or log in') => new HttpError(401, 'unauthorized', why)

export interface RouteContext<P = unknown> {
  req: Request
  url: URL
  params: Record<string, string>
  principal: P
  client: ClientInfo
  /** Read and parse the JSON body (size-limited); throws a 400 naming the problem. */
  json(): Promise<unknown>
}

export type Handler<P> = (c: RouteContext<P>) => Promise<Response> | Response

interface Route<P> {
  method: string
  /** as registered, e.g. `/api/stacks/:stack` (the metrics' route label) */
  path: string
  pattern: RegExp
  keys: string[]
  handler: Handler<P>
  public: boolean
  /** Also takes a wait condition handle's own token (the signal routes). */
  signalToken: boolean
}

export class Router<P> {
  readonly routes: Route<P>[] = []
  private sorted: Route<P>[] | null = null

  /** Register a handler for a path (or several paths: aliases with the same handler). */
  add(method: string, path: string | string[], handler: Handler<P>, opts: { public?: boolean; signalToken?: boolean } = {}): this {
    if (Array.isArray(path)) {
      for (const p of path) this.add(method, p, handler, opts)
      return this
    }
    const keys: string[] = []
    const pattern = new RegExp(
      '^' +
        path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/\/:(\w+)/g, (_, k: string) => {
          keys.push(k)
          return '/([^/]+)'
        }) +
        '/?$',
    )
    this.routes.push({ method, path, pattern, keys, handler, public: opts.public === true, signalToken: opts.signalToken === true })
    this.sorted = null
    return this
  }

  match(method: string, pathname: string): { route: Route<P>; params: Record<string, string> } | { allowed: string[] } | null {
    const allowed: string[] = []
    // The most literal route wins: `/stacks/:name/preview` before `/stacks/:name/:id`.
    this.sorted ??= [...this.routes].sort((a, b) => a.keys.length - b.keys.length)
    for (const route of this.sorted) {
      const m = route.pattern.exec(pathname)
      if (!m) continue
      if (route.method !== method && !(method === 'HEAD' && route.method === 'GET')) {
        allowed.push(route.method)
        continue
      }
      const params: Record<string, string> = {}
      route.keys.forEach((k, i) => {
        try {
          params[k] = decodeURIComponent(m[i + 1]!)
        } catch {
          params[k] = m[i + 1]!
        }
      })
      return { route, params }
    }
    return allowed.length ? { allowed } : null
  }
}

export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(status === 204 ? null : JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...headers },
  })
}

/**
 * Read a request's body, refusing (413) one over the limit, whether its size is declared
 * (Content-Length) or found while reading (chunked). Nothing is decoded yet.
 */
export async function readBody(req: Request, maxBytes: number): Promise<Buffer> {
  const declared = Number(req.headers.get('content-length') ?? '0')
  if (declared > maxBytes) throw new LimitError(`the request body is ${declared} bytes; the limit is ${maxBytes}`, 'body_bytes', maxBytes)
  if (!req.body) return Buffer.alloc(0)
  const reader = req.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    let chunk: ReadableStreamReadResult<Uint8Array>
    try {
      chunk = await reader.read()
    } catch {
      // the client went away (or broke the framing) before sending the whole body
      throw new HttpError(400, 'incomplete_body', 'the request body ended before it was complete')
    }
    const { done, value } = chunk
    if (done) break
    size += value.byteLength
    if (size > maxBytes) {
      await reader.cancel().catch(() => {})
      throw new LimitError(`the request body is larger than ${maxBytes} bytes`, 'body_bytes', maxBytes)
    }
    chunks.push(value)
  }
  return Buffer.concat(chunks)
}

/** A body read by readBody as JSON: UTF-8, a JSON media type (or none), valid JSON. An empty body is `{}`. */
export function parseJsonBody(bytes: Buffer, contentType: string): unknown {
  let text: string
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes)
  } catch {
    throw new HttpError(400, 'invalid_encoding', 'the request body is not valid UTF-8')
  }
  if (!text.trim()) return {}
  if (contentType && !/json|yaml|text\/plain/i.test(contentType)) throw new HttpError(415, 'unsupported_media_type', `send application/json (got ${contentType.split(';')[0]})`)
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (err) {
    const m = /position (\d+)/.exec((err as Error).message)
    let where = ''
    if (m) {
      const before = text.slice(0, Number(m[1]))
      const line = before.split('\n').length
      where = ` at line ${line}, column ${before.length - before.lastIndexOf('\n')}`
    }
    throw new HttpError(400, 'invalid_json', `the request body is not valid JSON${where}: ${(err as Error).message}`)
  }
  // Everything downstream (validation, templates, JSON columns) walks values recursively.
  if (nestedDeeperThan(value, MAX_JSON_DEPTH)) throw new HttpError(400, 'too_deep', `the request body is nested more than ${MAX_JSON_DEPTH} levels deep`)
  return value
}

/** Deeper than any template or request needs (HOT templates nest a few dozen levels at most). */
export const MAX_JSON_DEPTH = 200

function nestedDeeperThan(root: unknown, max: number): boolean {
  const todo: [unknown, number][] = [[root, 1]]
  while (todo.length) {
    const [v, depth] = todo.pop()!
    if (v === null || typeof v !== 'object') continue
    if (depth > max) return true
    for (const child of Array.isArray(v) ? v : Object.values(v as object)) if (child !== null && typeof child === 'object') todo.push([child, depth + 1])
  }
  return false
}

/** Parse with zod; a failure is a 400 listing each field path. */
export function parse<T extends z.ZodType>(schema: T, value: unknown, where = 'body'): z.infer<T> {
  const r = schema.safeParse(value)
  if (r.success) return r.data
  const issues = r.error.issues.map((i) => ({ code: 'structure', path: [where, ...i.path.map(String)].join('.'), line: null, column: null, message: i.message }))
  throw new ValidationError(`invalid ${where}: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, issues as never)
}

/**
 * PostgreSQL's refusals of values a client sent, as a 400: bad uuid text, out-of-range numbers and
 * dates (22P02, 22003, 22007), and U+0000, which neither text (22021) nor jsonb (22P05) can hold.
 * The statement failed, so its transaction wrote nothing.
 */
export function clientInputError(err: unknown): HttpError | null {
  const code = (err as { code?: unknown } | null)?.code
  if (code === '22P02' || code === '22003' || code === '22007') return new HttpError(400, 'invalid_input', 'a value in the request has the wrong format')
  if (code === '22021' || code === '22P05') return new HttpError(400, 'invalid_input', 'a value in the request contains a character that cannot be stored (U+0000)')
  return null
}

/** What a 5xx says: the details (a stack trace, server paths) go to the server log only. */
export const INTERNAL_MESSAGE = 'internal error; the details are in the server log'

/** Turn any thrown value into a Kiln API response (the only place errors become HTTP for /api). */
export function errorResponse(err: unknown, onUnexpected: (err: unknown) => void): Response {
  err = clientInputError(err) ?? err
  if (err instanceof HttpError) return json({ error: { code: err.code, message: err.message, ...err.extra } }, err.status, err.headers)
  if (err instanceof DomainError) return json(err.body(), err.status)
  onUnexpected(err)
  return json({ error: { code: 'internal', message: INTERNAL_MESSAGE } }, 500)
}

/** A true/false query parameter (`true`/`1`, `false`/`0`); anything else is refused, never read as false. */
export const boolParam = (v: string | null, name: string): boolean => {
  if (v === null || v === '' || v === 'false' || v === '0') return false
  if (v === 'true' || v === '1') return true
  throw new HttpError(400, 'invalid_query', `${name} must be true or false`)
}

export const intParam = (v: string | null, def: number, min: number, max: number, name: string): number => {
  if (v === null || v === '') return def
  if (!/^\d+$/.test(v)) throw new HttpError(400, 'invalid_query', `${name} must be a non-negative integer`)
  const n = Number(v)
  if (n < min || n > max) throw new HttpError(400, 'invalid_query', `${name} must be between ${min} and ${max}`)
  return n
}
