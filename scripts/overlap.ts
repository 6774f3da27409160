/**
 * `npm run overlap [-- --stacks 40 --max-updates 10 --gap-ms 150 --runs 3 --workers 4]`
 *
 * The long overlap suite on an embedded PostgreSQL of its own (under the
 * system temp dir, removed afterwards). Prints one JSON report per run; exits
 * 1 on any violation. A failing run names its seed; pass `--seed` to replay it.
 */
import { TestCluster } from '../test/helpers/cluster'
import { ownPostgres } from '../test/helpers/own-postgres'
import { numberFlag } from './args'
import { runOverlap } from '../test/reliability/overlap'

const argv = process.argv.slice(2)
const num = (flag: string, def: number) => numberFlag(argv, flag, def)

async function main() {
  const pg = await ownPostgres('overlap')
  const url = pg.url
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
  }
  process.exit(failed ? 1 : 0)
}

void main()
