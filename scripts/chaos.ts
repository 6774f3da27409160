/**
 * `npm run chaos [-- --stacks 20 --rounds 8 --workers 4 --kill-every-ms 800 --pg-down-ms 3000 --runs 3]`
 *
 * The long chaos suite: the same driver as test/reliability/chaos.test.ts,
 * bigger and repeated. Prints one JSON report per run and exits 1 if any
 * invariant was violated; the trail of the stacks a violation names is
 * written under .data/chaos-failures/. `--until-fail` repeats until one does.
 */
import path from 'node:path'
import { runChaos } from '../test/reliability/chaos'
import { numberFlag } from './args'

const argv = process.argv.slice(2)
const num = (flag: string, def: number) => numberFlag(argv, flag, def)

async function main() {
  // --until-fail: repeat (up to --runs) until a run finds a violation
  const untilFail = argv.includes('--until-fail')
  const runs = num('--runs', untilFail ? 1000 : 3)
  let failed = 0
  let ran = 0
  const all: number[] = []
  for (let r = 1; r <= runs; r++) {
    ran = r
    const report = await runChaos({
      stacks: num('--stacks', 20),
      rounds: num('--rounds', 8),
      workers: num('--workers', 4),
      killEveryMs: num('--kill-every-ms', 800),
      restartPostgres: true,
      pgDownMs: num('--pg-down-ms', 3000),
      forensicsDir: path.join('.data', 'chaos-failures'),
      log: argv.includes('--verbose') ? (l) => console.log(`  ${l}`) : undefined,
    })
    all.push(...report.recoveryMs)
    const sorted = [...report.recoveryMs].sort((a, b) => a - b)
    console.log(JSON.stringify({ run: r, ...report, recoveryMs: undefined, recoveryMedianMs: sorted[Math.floor(sorted.length / 2)] ?? null, recoveryMaxMs: sorted.at(-1) ?? null }))
    if (report.violations.length) {
      failed++
      console.log(`trail of the stacks involved: ${report.forensics}`)
      if (untilFail) break
    }
  }
  all.sort((a, b) => a - b)
  console.log(`${ran} run(s), ${failed} with violations; kill -> locks broken: median ${all[Math.floor(all.length / 2)] ?? '-'} ms, max ${all.at(-1) ?? '-'} ms`)
  process.exit(failed ? 1 : 0)
}

void main()
