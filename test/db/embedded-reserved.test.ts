/**
 * The embedded server keeps Kiln's own connections for Kiln: `npm start`'s
 * cluster starts with reserved_connections set to what Kiln may hold (its
 * role is a superuser, who may use them), so tenants' roles can never take
 * them; and a worker's start-up report then has nothing to warn about, and
 * gives tenants what is left: 300 − 3 − 71 − 71 with the default settings.
 */
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { afterAll, expect, test } from 'vitest'
import { kilnConnections, targetIsOwnServer, typeConfigFrom } from '../../lib/config'
import { resolveDatabase, type ResolvedDatabase } from '../../lib/db/bootstrap'
import { parseEnv } from '../../lib/env'
import { targetCapacityReport } from '../../lib/resources/builtin/postgres-capacity'

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-reserved-'))
fs.chmodSync(tmp, 0o755) // as root, PostgreSQL runs as the postgres user, who must enter it
let database: ResolvedDatabase | undefined

afterAll(async () => {
  await database?.release()
  fs.rmSync(tmp, { recursive: true, force: true })
})

/** A port no one listens on now (the system picks it), for this cluster alone. */
const freePort = () =>
  new Promise<number>((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port
      srv.close(() => resolve(port))
    })
  })

test("the embedded server reserves Kiln's connections, and the start-up report leaves tenants the rest", async () => {
  const e = parseEnv({ KILN_DATA_DIR: tmp, EMBEDDED_PG_PORT: String(await freePort()) })
  database = await resolveDatabase(e)
  const kiln = kilnConnections(e, true)
  expect(kiln).toEqual({ ownServer: 71, target: 71 })
  const c = new pg.Client({ connectionString: database.url })
  await c.connect()
  try {
    const { rows } = await c.query(`SELECT current_setting('reserved_connections') AS reserved, current_setting('max_connections') AS max`)
    expect(rows[0]).toEqual({ reserved: '71', max: '300' })
  } finally {
    await c.end()
  }
  const report = await targetCapacityReport(typeConfigFrom(e, database.url), { ownServer: targetIsOwnServer(e, database.url) })
  expect(report.warnings).toEqual([])
  expect(report.info).toContain(`155 connections for all their roles together (max_connections 300 − superuser_reserved_connections 3 − reserved_connections 71 − 71 kept for Kiln's own connections), at most 100 per project`)
})
