/** Health, the OpenAPI document and the web server's metrics. */
import { ForbiddenError } from '../../plan/errors'
import type { Principal } from '../../services/accounts'
import { health, liveness } from '../../services/health'
import { webMetrics } from '../../services/metrics'
import type { ApiDeps } from '../deps'
import { json, type Router } from '../http'
import { openApiDocument } from '../openapi'

export function systemRoutes(d: ApiDeps, router: Router<Principal>): void {
  router
    // Public: up or down, nothing about the machine. The details (hosts, pids, versions) are for admins.
    .add('GET', '/api/health', async () => {
      const status = await liveness(d.db)
      return json({ status }, status === 'up' ? 200 : 503)
    }, { public: true })
    .add('GET', '/api/health/details', async (c) => {
      if (c.principal.role !== 'admin') throw new ForbiddenError('the health details are for admin tokens')
      const h = await health(d.db, d.leaseMs)
      return json(h, h.status === 'down' ? 503 : 200)
    })
    .add('GET', '/api/openapi.json', () => json(openApiDocument()), { public: true })
    // Prometheus: for admin tokens (a scraper sends one as a bearer token). Workers serve their own.
    .add('GET', '/metrics', async (c) => {
      if (c.principal.role !== 'admin') throw new ForbiddenError('the metrics are for admin tokens')
      const m = await webMetrics(d.db, d.leaseMs)
      return new Response(m.body, { status: 200, headers: { 'content-type': m.contentType, 'cache-control': 'no-store' } })
    })
}
