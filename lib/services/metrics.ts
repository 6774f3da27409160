/** The web server's Prometheus text: its own counters and histograms, and the database-wide gauges read now. */
import type { Db } from '../db/client'
import { readDatabaseGauges } from '../db/queries/metrics'
import { addDatabaseGauges, processMetrics } from '../metrics/registry'

export async function webMetrics(db: Db, leaseMs: number): Promise<{ body: string; contentType: string }> {
  const m = processMetrics('web')
  addDatabaseGauges(m, () => readDatabaseGauges(db.pool, leaseMs))
  return { body: await m.registry.metrics(), contentType: m.registry.contentType }
}
