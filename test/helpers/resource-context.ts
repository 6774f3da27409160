/**
 * A ResourceContext for calling a resource type directly, as the engine
 * would, with its records of outside objects in a real test database
 * (lib/db/queries/outside-objects.ts):
 *
 *   const records = await outsideRecords()     // in beforeAll; records.close() in afterAll
 *   const ctx = resourceContext(records, { projectId, config: { workspaceDir } })
 */
import crypto from 'node:crypto'
import pg from 'pg'
import { outsideObjectStore } from '../../lib/db/queries/outside-objects'
import { bindOutsideObjects } from '../../lib/engine/check-resource'
import type { OutsideObjectStore } from '../../lib/engine/ports'
import { silentLogger } from '../../lib/logger'
import type { ResourceContext } from '../../lib/resources/types'
import { outsideRun } from '../../lib/resources/outside-run'
import { testDatabase, type TestDatabase } from './db'

export interface OutsideRecords {
  store: OutsideObjectStore
  pool: pg.Pool
  db: TestDatabase
  close(): Promise<void>
}

export async function outsideRecords(): Promise<OutsideRecords> {
  const db = await testDatabase()
  const pool = new pg.Pool({ connectionString: db.url, max: 4 })
  return {
    store: outsideObjectStore(pool, (_what, fn) => fn()),
    pool,
    db,
    async close() {
      await pool.end()
      await db.drop()
    },
  }
}

export const PROJECT_A = '00000000-0000-4000-8000-00000000000a'
export const STACK_1 = '00000000-0000-4000-8000-000000000051'

/** A context for row `resourceUuid` of resource `resourceName` (defaults: project A, stack 1, resource r, row …001). */
export function resourceContext(records: Pick<OutsideRecords, 'store'>, over: Partial<Omit<ResourceContext, 'objects' | 'signals'>> = {}, signal = new AbortController().signal): ResourceContext {
  const base = {
    projectId: PROJECT_A,
    stackId: STACK_1,
    stackName: 'st',
    resourceName: 'r',
    resourceUuid: '00000000-0000-4000-8000-000000000001',
    replacesUuid: null,
    physicalName: 'st-r-000000000001',
    signal,
    progress: () => {},
    log: silentLogger,
    config: { workspaceDir: '/nonexistent' },
    ...over,
  }
  const owner = { projectId: base.projectId, stackId: base.stackId, resourceName: base.resourceName, resourceUuid: base.resourceUuid }
  // Types tested this way take no signals and do not park; a wait condition is tested with real workers.
  return { ...outsideRun('this test context'), ...base, objects: bindOutsideObjects(records.store, owner) }
}

export const uuid = () => crypto.randomUUID()
