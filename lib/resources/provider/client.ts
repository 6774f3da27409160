/**
 * Kiln's side of the provider protocol's HTTP: signed requests with a time
 * limit, retried with back-off on what may pass (a connection refused or
 * reset, a timeout, 429, 5xx), and replies checked against the protocol
 * (./protocol.ts). Everything a provider gets wrong becomes a
 * ResourceActionError that names the provider and the operation.
 */
import type { z } from 'zod'
import { ResourceActionError } from '../types'
import { sleep } from '../builtin/util'
import { Accepted, ErrorReply, type AcceptedT } from './protocol'
import { sign, SIGNATURE_HEADER } from './signature'

export interface ProviderEndpoint {
  /** The provider's registered name (in messages). */
  name: string
  /** Its base URL, without a trailing slash. */
  url: string
  secret: string
}

/** A request's own time limit; the action's deadline bounds it too. */
export const REQUEST_TIMEOUT_MS = 30_000
/** Attempts of one request before it fails (the first and four retries: about 6 s of back-off). */
export const ATTEMPTS = 5
const FIRST_BACKOFF_MS = 200
/** Largest reply read. */
const MAX_REPLY_BYTES = 4 * 1024 * 1024

export type Reply<T> =
  | { kind: 'ok'; value: T }
  | { kind: 'accepted'; accepted: AcceptedT }
  /** A 4xx the provider explained: the action failed (or, an update, asks to be replaced). */
  | { kind: 'refused'; status: number; error: string; replace: boolean }

export interface SendOptions {
  signal: AbortSignal
  /** Stop retrying after this (the action's deadline). */
  deadline?: Date
  timeoutMs?: number
  /** Back-off before retry n (tests make it short). */
  backoffMs?: (attempt: number) => number
}

class Transient extends Error {
  constructor(
    message: string,
    readonly retryAfterMs: number | null = null,
  ) {
    super(message)
  }
}

const backoff = (attempt: number) => FIRST_BACKOFF_MS * 2 ** (attempt - 1)

/** POST `body` to `<url>/<path>` (GET when body is null) and read the reply as `schema`, retrying what may pass. */
export async function send<T>(p: ProviderEndpoint, path: string, body: unknown | null, schema: z.ZodType<T>, opts: SendOptions): Promise<Reply<T>> {
  const what = `provider ${p.name}: ${body === null ? 'GET' : 'POST'} /${path}`
  const text = body === null ? '' : JSON.stringify(body)
  for (let attempt = 1; ; attempt++) {
    opts.signal.throwIfAborted()
    try {
      return await once(p, path, text, body === null, schema, opts, what)
    } catch (err) {
      if (!(err instanceof Transient)) throw err
      const wait = err.retryAfterMs ?? (opts.backoffMs ?? backoff)(attempt)
      const late = opts.deadline !== undefined && Date.now() + wait >= opts.deadline.getTime()
      if (attempt >= ATTEMPTS || late) throw new ResourceActionError(`${what} failed ${attempt} time(s); the last: ${err.message}`)
      await sleep(wait / 1000, opts.signal)
    }
  }
}

async function once<T>(p: ProviderEndpoint, path: string, text: string, get: boolean, schema: z.ZodType<T>, opts: SendOptions, what: string): Promise<Reply<T>> {
  const timeout = AbortSignal.timeout(opts.timeoutMs ?? REQUEST_TIMEOUT_MS)
  let res: Response
  try {
    res = await fetch(`${p.url}/${path}`, {
      method: get ? 'GET' : 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', [SIGNATURE_HEADER]: sign(p.secret, text) },
      body: get ? undefined : text,
      signal: AbortSignal.any([opts.signal, timeout]),
      redirect: 'error',
    })
  } catch (err) {
    opts.signal.throwIfAborted()
    if (timeout.aborted) throw new Transient(`no answer within ${opts.timeoutMs ?? REQUEST_TIMEOUT_MS} ms`)
    throw new Transient(networkError(err))
  }
  const raw = await readCapped(res, what)
  if (res.status === 429 || res.status >= 500) throw new Transient(`HTTP ${res.status}${raw ? `: ${raw.slice(0, 200)}` : ''}`, retryAfter(res))
  const json = parseJson(raw, what, res.status)
  if (res.status === 202) return { kind: 'accepted', accepted: checked(Accepted, json ?? {}, what, 202) }
  if (res.status >= 400) {
    const e = ErrorReply.safeParse(json)
    return { kind: 'refused', status: res.status, error: e.success ? e.data.error : `HTTP ${res.status}${raw ? `: ${raw.slice(0, 200)}` : ''}`, replace: e.success && e.data.replace === true }
  }
  if (res.status !== 200 && res.status !== 204) throw new ResourceActionError(`${what} answered HTTP ${res.status}, which the protocol does not use`)
  return { kind: 'ok', value: checked(schema, json ?? {}, what, res.status) }
}

async function readCapped(res: Response, what: string): Promise<string> {
  const declared = Number(res.headers.get('content-length') ?? 0)
  if (declared > MAX_REPLY_BYTES) throw new ResourceActionError(`${what} answered ${declared} bytes; at most ${MAX_REPLY_BYTES} are read`)
  const text = await res.text()
  if (text.length > MAX_REPLY_BYTES) throw new ResourceActionError(`${what} answered more than ${MAX_REPLY_BYTES} bytes`)
  return text
}

function parseJson(raw: string, what: string, status: number): unknown {
  if (!raw.trim()) return null
  try {
    return JSON.parse(raw)
  } catch {
    if (status >= 400) return null
    throw new ResourceActionError(`${what} answered HTTP ${status} with a body that is not JSON: ${raw.slice(0, 200)}`)
  }
}

function checked<T>(schema: z.ZodType<T>, value: unknown, what: string, status: number): T {
  const r = schema.safeParse(value)
  if (r.success) return r.data
  const issue = r.error.issues[0]!
  throw new ResourceActionError(`${what} answered HTTP ${status} with a reply the protocol does not allow: ${issue.path.join('.') || '(the body)'}: ${issue.message}`)
}

function retryAfter(res: Response): number | null {
  const v = res.headers.get('retry-after')
  if (!v || !/^\d{1,5}$/.test(v)) return null
  return Math.min(Number(v) * 1000, 60_000)
}

function networkError(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause
  return cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err))
}
