/**
 * Overlap, short version (the long one: `npm run overlap`): several stacks at
 * once, each sent up to 10 updates in quick succession; the final state is
 * the last template and nothing is replaced or updated needlessly.
 */
import { afterAll, beforeAll, expect, test } from 'vitest'
import { TestCluster } from '../helpers/cluster'
import { testDatabase, type TestDatabase } from '../helpers/db'
import { runOverlap } from './overlap'

let db: TestDatabase
let c: TestCluster

beforeAll(async () => {
  db = await testDatabase()
  c = await TestCluster.start(db.url, { workers: 3, leaseMs: 2000 })
})
afterAll(async () => {
  await c?.stop()
  await db?.drop()
})

test('k updates in quick succession on many stacks: last template wins, nothing needless', { timeout: 240_000 }, async () => {
  for (const seed of [7, 1234]) {
    const report = await runOverlap(c, { stacks: 8, maxUpdates: 10, gapMs: 150, seed })
    console.log(`overlap: ${JSON.stringify({ seed, ...report })}`)
    expect(report.violations).toEqual([])
    expect(report.updates).toBeGreaterThan(8)
  }
})
