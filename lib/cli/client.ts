/** A small client for Kiln's REST API, used by the CLI. Errors carry the server's message and issues. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly issues: { path: string; line: number | null; column: number | null; message: string }[] = [],
    /** The error body's other fields (a conflict's `diff`, `since`, `rows`). */
    readonly details: Record<string, unknown> = {},
  ) {
    super(message)
  }
}

export class KilnClient {
  constructor(
    readonly url: string,
    readonly token: string,
  ) {}

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the API's JSON, read by the commands that asked for it
  async request<T = any>(method: string, path: string, body?: unknown, raw = false): Promise<T> {
    let res: Response
    try {
      res = await fetch(this.url.replace(/\/$/, '') + path, {
        method,
        headers: { 'x-auth-token': this.token, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      })
    } catch (err) {
      throw new ApiError(0, `cannot reach Kiln at ${this.url}: ${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}`)
    }
    const text = await res.text()
    if (!res.ok) {
      let message = `${res.status} ${res.statusText}`
      let issues: ConstructorParameters<typeof ApiError>[2] = []
      let details = {}
      try {
        const b = JSON.parse(text)
        message = b.error?.message ?? message
        issues = b.error?.issues ?? []
        details = b.error ?? {}
      } catch {
        /* not JSON */
      }
      throw new ApiError(res.status, message, issues, details)
    }
    if (raw) return text as T
    return (text ? JSON.parse(text) : null) as T
  }

  /* eslint-disable @typescript-eslint/no-explicit-any -- as request */
  get = <T = any>(path: string) => this.request<T>('GET', path)
  post = <T = any>(path: string, body: unknown = {}) => this.request<T>('POST', path, body)
  put = <T = any>(path: string, body: unknown) => this.request<T>('PUT', path, body)
  patch = <T = any>(path: string, body: unknown) => this.request<T>('PATCH', path, body)
  del = <T = any>(path: string) => this.request<T>('DELETE', path)
  /* eslint-enable @typescript-eslint/no-explicit-any */
}
