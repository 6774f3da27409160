/** Serving a `(Request) => Response` handler from Node's http server (the custom server and tests). */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { Readable } from 'node:stream'
import { promisify } from 'node:util'
import zlib from 'node:zlib'
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
      if (!response.body || req.method === 'HEAD') {
        res.writeHead(response.status, out)
        return void res.end()
      }
      let buf = Buffer.from(await response.arrayBuffer())
      if (compressible(buf, out, req.headers['accept-encoding'])) {
        buf = await gzip(buf, { level: 1 })
        out['content-encoding'] = 'gzip'
        out.vary = out.vary ? `${out.vary}, Accept-Encoding` : 'Accept-Encoding'
        delete out['content-length']
      }
      res.writeHead(response.status, out)
      res.end(buf)
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

const gzip = promisify(zlib.gzip)
/** Below this a body is sent as it is: gzip's header and the work would not pay. */
const COMPRESS_FROM_BYTES = 2048
const TEXTUAL = /^(application\/(json|[\w.+-]*\+json|[\w.+-]*\+xml|xml)|text\/)/i

/**
 * Big textual answers (a 1,000-row traversal graph is 0.65 MB of JSON, about
 * 0.1 MB gzipped) go gzipped to a client that accepts it; level 1, on libuv's
 * thread pool, so the event loop does not wait for it.
 */
function compressible(body: Buffer, headers: Record<string, string | string[]>, acceptEncoding: string | undefined): boolean {
  if (body.length < COMPRESS_FROM_BYTES || headers['content-encoding']) return false
  const type = headers['content-type']
  if (typeof type !== 'string' || !TEXTUAL.test(type)) return false
  return acceptsGzip(acceptEncoding ?? '')
}

/** Accept-Encoding names gzip (or *) without q=0. */
function acceptsGzip(header: string): boolean {
  for (const part of header.split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';')
    if (name !== 'gzip' && name !== '*') continue
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='))
    return q === undefined || Number(q.slice(2)) > 0
  }
  return false
}

/** Whether a request path addresses the Heat API once its dot segments are resolved, as the API itself reads it. */
function isHeatPath(path: string): boolean {
  try {
    return new URL(`http://kiln.invalid${path}`).pathname.startsWith('/v1/')
  } catch {
    return false
  }
}
