/** Serving a `(Request) => Response` handler from Node's http server (the custom server and tests). */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { Readable } from 'node:stream'
import { API_SECURITY_HEADERS } from '../server/security-headers'
import { heatError } from './heat-errors'
import { HttpError, type ClientInfo } from './http'

export function toNodeHandler(handle: (req: Request, client: ClientInfo) => Promise<Response>, opts: { trustProxy?: boolean } = {}) {
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    try {
      const proto = opts.trustProxy && req.headers['x-forwarded-proto'] === 'https' ? 'https' : 'http'
      const url = `${proto}://${req.headers.host ?? 'localhost'}${req.url ?? '/'}`
      const headers = new Headers()
      for (const [k, v] of Object.entries(req.headers)) {
        if (Array.isArray(v)) for (const x of v) headers.append(k, x)
        else if (v !== undefined) headers.set(k, v)
      }
      const hasBody = req.method !== 'GET' && req.method !== 'HEAD'
      const request = new Request(url, {
        method: req.method,
        headers,
        ...(hasBody ? { body: Readable.toWeb(req) as ReadableStream, duplex: 'half' } : {}),
      } as RequestInit)
      const response = await handle(request, { address: req.socket.remoteAddress })
      const out: Record<string, string | string[]> = {}
      response.headers.forEach((v, k) => {
        out[k] = k === 'set-cookie' ? [...((out[k] as string[] | undefined) ?? []), v] : v
      })
      // A body nobody read to the end (a route that takes none, a request refused before its body
      // was read) stalls the connection: the next request on it would wait behind it forever.
      if (hasBody && !req.complete) out.connection = 'close'
      res.writeHead(response.status, out)
      if (response.body && req.method !== 'HEAD') {
        const buf = Buffer.from(await response.arrayBuffer())
        res.end(buf)
      } else res.end()
    } catch {
      // A request Node accepted but a Request cannot hold (a Host header that makes no URL, or one with credentials):
      // a 400 in the API's own format, which repeats nothing of the request.
      if (res.headersSent) return void res.end()
      const message = 'the request cannot be read: its Host header and path do not make a URL'
      const body = isHeatPath(req.url ?? '/')
        ? await heatError(new HttpError(400, 'bad_request', message), () => {}).text()
        : JSON.stringify({ error: { code: 'bad_request', message } })
      res.writeHead(400, { 'content-type': 'application/json; charset=utf-8', ...API_SECURITY_HEADERS, ...(req.complete ? {} : { connection: 'close' }) })
      res.end(body)
    }
  }
}

/** Whether a request path addresses the Heat API once its dot segments are resolved, as the API itself reads it. */
function isHeatPath(path: string): boolean {
  try {
    return new URL(`http://kiln.invalid${path}`).pathname.startsWith('/v1/')
  } catch {
    return false
  }
}
