/**
 * A fresh database and a worker-less TestCluster for one test file, for tests
 * that drive the engine's calls themselves (the cluster's service layer
 * creates stacks; no worker takes their jobs):
 *
 *   let db: TestDatabase
 *   let c: TestCluster
 *   workerlessCluster((d, cl) => ((db = d), (c = cl)))
 *
 * Registers the file's beforeAll/afterAll (hooks run in order, after-hooks in
 * reverse, so a file's own hooks registered later may use both).
 */
import { afterAll, beforeAll } from 'vitest'
import { TestCluster } from './cluster'
import { testDatabase, type TestDatabase } from './db'

export function workerlessCluster(set: (db: TestDatabase, c: TestCluster) => void): void {
  let db: TestDatabase | undefined
  let c: TestCluster | undefined
  beforeAll(async () => {
    db = await testDatabase()
    c = await TestCluster.start(db.url, { workers: 0 })
    set(db, c)
  })
  afterAll(async () => {
    await c?.stop()
    await db?.drop()
  })
}
