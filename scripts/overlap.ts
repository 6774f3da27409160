/**
 * `npm run overlap [-- --stacks 40 --max-updates 10 --gap-ms 150 --runs 3 --workers 4]`
 *
 * The long overlap suite on an embedded PostgreSQL of its own (under the
 * system temp dir, removed afterwards). Prints one JSON report per run; exits
 * 1 on any violation. A failing run names its seed; pass `--seed` to replay it.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { startEmbeddedPostgres } from '../lib/db/embedded'
import { applyMigrations } from '../lib/db/migrate'
import { TestCluster } from '../test/helpers/cluster'
import { runOverlap } from '../test/reliability/overlap'

const argv = process.argv.slice(2)
const num = (flag: string, def: number) => {
  const i = argv.indexOf(flag)
  return i >= 0 ? Number(argv[i + 1]) : def
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-overlap-'))
  fs.chmodSync(dir, 0o755)
  const pg = await startEmbeddedPostgres({ dataDir: path.join(dir, 'pg') })
  const url = pg.databaseUrl('postgres')
  await applyMigrations(url)
  const c = await TestCluster.start(url, { workers: num('--workers', 4), leaseMs: 2000 })
  let failed = 0
  try {
    for (let r = 1; r <= num('--runs', 3); r++) {
      const t = Date.now()
      const report = await runOverlap(c, { stacks: num('--stacks', 40), maxUpdates: num('--max-updates', 10), gapMs: num('--gap-ms', 150), seed: argv.includes('--seed') ? num('--seed', 1) : Date.now() + r })
      console.log(JSON.stringify({ run: r, seconds: (Date.now() - t) / 1000, ...report }))
      if (report.violations.length) failed++
    }
  } finally {
    await c.stop()
    await pg.stop()
    fs.rmSync(dir, { recursive: true, force: true })
  }
  process.exit(failed ? 1 : 0)
}

void main()
