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
 * reverse, so a file's own hooks registered later may use both), and an
 * afterEach that stops the worker rows a test registered: a claim shares a
 * burst of jobs with every live worker (kiln_claim_jobs), so a stand-in worker
 * left running by one test would take no jobs but halve the next test's claims.
 */
import { afterAll, afterEach, beforeAll } from 'vitest'
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
  afterEach(async () => {
    if (c) await stopStandInWorkers(c)
  })
  afterAll(async () => {
    await c?.stop()
    await db?.drop()
  })
}

/** Stop every worker row still live (the stand-ins a test registered with registerWorker). */
export async function stopStandInWorkers(c: TestCluster): Promise<void> {
  await c.db.pool.query(`UPDATE worker SET state = 'stopped', stopped_at = now() WHERE stopped_at IS NULL`)
}
