/**
 * A worker's own metrics endpoint: `GET /metrics` on a port of its own
 * (KILN_WORKER_METRICS_PORT; off when unset), since a worker serves nothing
 * else over HTTP.
 */
import http from 'node:http'
import type { Registry } from 'prom-client'

export interface MetricsServer {
  port: number
  close(): Promise<void>
}

export function serveMetrics(registry: Registry, port: number, host: string): Promise<MetricsServer> {
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: this port serves GET /metrics only\n')
      return
    }
    registry.metrics().then(
      (body) => res.writeHead(200, { 'content-type': registry.contentType }).end(body),
      (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${err.message}\n`),
    )
  })
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      const addr = server.address()
      resolve({
        port: typeof addr === 'object' && addr ? addr.port : port,
        close: () => new Promise<void>((r) => server.close(() => r())),
      })
    })
  })
}
