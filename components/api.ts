/**
 * The browser's API client: same-origin fetch with the session cookie, the
 * CSRF header on every write, and errors as ApiError carrying the server's
 * body (code, message, issues with line and column).
 */
export interface ApiIssue {
  code: string
  path: string
  line: number | null
  column: number | null
  message: string
}

export class ApiError extends Error {
  override name = 'ApiError'
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly issues: ApiIssue[] = [],
    /** The error body's other fields (a conflict's `current`, `since`, `diff`). */
    readonly details: Record<string, unknown> = {},
  ) {
    super(message)
  }
}

let csrf: string | null = null

/** Where the page's HTML leaves the reads it started (earlyReadsScript). */
const EARLY_KEY = '__kilnEarlyReads'
/** The early reads being claimed now (inside withEarlyReads only). */
let early: Record<string, Promise<Response>> | null = null

/**
 * A script for a page's HTML that asks for `paths` as soon as the HTML is
 * parsed, before the page's scripts have loaded (over half a second of a
 * busy machine). The JSON is made safe to sit inside a script element.
 */
export function earlyReadsScript(paths: string[]): string {
  const list = JSON.stringify(paths).replace(/</g, '\\u003c')
  return `(function(p){var m={};p.forEach(function(u){m[u]=fetch(u,{headers:{accept:'application/json'},credentials:'same-origin'})});window.${EARLY_KEY}=m})(${list})`
}

/**
 * Runs `start` (which must ask for its reads before its first await) with the
 * reads the page's HTML started: a GET of the same path takes that answer
 * instead of asking again. They are taken once: a later load asks afresh.
 */
export function withEarlyReads<T>(start: () => T): T {
  const w = typeof window === 'undefined' ? null : (window as unknown as Record<string, Record<string, Promise<Response>> | undefined>)
  early = w?.[EARLY_KEY] ?? null
  if (w) delete w[EARLY_KEY]
  try {
    return start()
  } finally {
    early = null
  }
}

export function setCsrfToken(token: string | null) {
  csrf = token
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the API's JSON, typed by each caller
export async function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' }
  if (body !== undefined) headers['content-type'] = 'application/json'
  if (method !== 'GET' && csrf) headers['x-csrf-token'] = csrf
  const ask = () => fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' })
  const started = method === 'GET' ? early?.[path] : undefined
  if (started) delete early![path]
  let res: Response
  try {
    // An early read that failed to reach the server is asked for again.
    res = await (started ? started.catch(ask) : ask())
  } catch {
    throw new ApiError(0, 'network', 'cannot reach the Kiln server')
  }
  const text = await res.text()
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- an error body or the caller's T
  let parsed: any
  try {
    parsed = text ? JSON.parse(text) : null
  } catch {
    parsed = null
  }
  if (!res.ok) {
    const e = parsed?.error ?? {}
    throw new ApiError(res.status, String(e.code ?? 'error'), String(e.message ?? `${res.status} ${res.statusText}`), Array.isArray(e.issues) ? e.issues : [], e)
  }
  return parsed as T
}

export interface SessionInfo {
  project: { id: string; name: string }
  name: string
  role?: string
  csrfToken?: string
}

export async function loadSession(): Promise<SessionInfo | null> {
  try {
    const s = await api<SessionInfo>('GET', '/api/session')
    setCsrfToken(s.csrfToken ?? null)
    return s
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return null
    throw err
  }
}

export async function login(token: string): Promise<SessionInfo> {
  const s = await api<SessionInfo>('POST', '/api/session', { token })
  setCsrfToken(s.csrfToken ?? null)
  return s
}

export async function logout(): Promise<void> {
  await api('DELETE', '/api/session').catch(() => undefined)
  setCsrfToken(null)
}

export function statusLabel(action: string, status: string) {
  return `${action}_${status}`
}
