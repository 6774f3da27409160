/**
 * A small framework-free HTTP layer for the API: Web-standard Request in,
 * Response out, so the same handlers run under the custom server, in tests
 * and anywhere else. Routes are matched by method and a path pattern
 * (`/api/stacks/:stack`); errors become JSON bodies with the right status,
 * and nothing a client sends can produce a 500 (anything unexpected is logged
 * and answered as a generic 500 without details).
 */
import { z } from 'zod'
import { DomainError, LimitError, ValidationError } from '../services/errors'

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message)
  }
}

export const unauthorized = (why = 'authentication required: send X-Auth-Token, Authorization: Bearer <token>, or log in') => new HttpError(401, 'unauthorized', why)

export interface RouteContext<P = unknown> {
  req: Request
  url: URL
  params: Record<string, string>
  principal: P
  /** Read and parse the JSON body (size-limited); throws a 400 naming the problem. */
  json(): Promise<unknown>
}

export type Handler<P> = (c: RouteContext<P>) => Promise<Response> | Response

interface Route<P> {
  method: string
  pattern: RegExp
  keys: string[]
  handler: Handler<P>
  public: boolean
}

export class Router<P> {
  readonly routes: Route<P>[] = []
  private sorted: Route<P>[] | null = null

  /** Register a handler for a path (or several paths: aliases with the same handler). */
  add(method: string, path: string | string[], handler: Handler<P>, opts: { public?: boolean } = {}): this {
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
    this.routes.push({ method, pattern, keys, handler, public: opts.public === true })
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

/** Read a JSON body with a size limit. An empty body is `{}`. */
export async function readJson(req: Request, maxBytes: number): Promise<unknown> {
  const declared = Number(req.headers.get('content-length') ?? '0')
  if (declared > maxBytes) throw new LimitError(`the request body is ${declared} bytes; the limit is ${maxBytes}`, 'body_bytes', maxBytes)
  const text = await readText(req, maxBytes)
  if (!text.trim()) return {}
  const type = req.headers.get('content-type') ?? ''
  if (type && !/json|yaml|text\/plain/i.test(type)) throw new HttpError(415, 'unsupported_media_type', `send application/json (got ${type.split(';')[0]})`)
  try {
    return JSON.parse(text)
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
}

async function readText(req: Request, maxBytes: number): Promise<string> {
  if (!req.body) return ''
  const reader = req.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > maxBytes) {
      await reader.cancel().catch(() => {})
      throw new LimitError(`the request body is larger than ${maxBytes} bytes`, 'body_bytes', maxBytes)
    }
    chunks.push(value)
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks))
  } catch {
    throw new HttpError(400, 'invalid_encoding', 'the request body is not valid UTF-8')
  }
}

/** Parse with zod; a failure is a 400 listing each field path. */
export function parse<T extends z.ZodType>(schema: T, value: unknown, where = 'body'): z.infer<T> {
  const r = schema.safeParse(value)
  if (r.success) return r.data
  const issues = r.error.issues.map((i) => ({ code: 'structure', path: [where, ...i.path.map(String)].join('.'), line: null, column: null, message: i.message }))
  throw new ValidationError(`invalid ${where}: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, issues as never)
}

/** Turn any thrown value into a response (the only place errors become HTTP). */
export function errorResponse(err: unknown, onUnexpected: (err: unknown) => void): Response {
  if (err instanceof HttpError) return json({ error: { code: err.code, message: err.message, ...err.extra } }, err.status)
  if (err instanceof DomainError) return json(err.body(), err.status)
  // PostgreSQL input errors from values a client sent (bad uuid text, out-of-range numbers).
  const code = (err as { code?: string }).code
  if (code === '22P02' || code === '22003' || code === '22007') return json({ error: { code: 'invalid_input', message: 'a value in the request has the wrong format' } }, 400)
  onUnexpected(err)
  return json({ error: { code: 'internal', message: 'internal error; the details are in the server log' } }, 500)
}

export const intParam = (v: string | null, def: number, min: number, max: number, name: string): number => {
  if (v === null || v === '') return def
  if (!/^\d+$/.test(v)) throw new HttpError(400, 'invalid_query', `${name} must be a non-negative integer`)
  const n = Number(v)
  if (n < min || n > max) throw new HttpError(400, 'invalid_query', `${name} must be between ${min} and ${max}`)
  return n
}
