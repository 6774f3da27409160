/**
 * `npm run chaos [-- --stacks 20 --rounds 8 --workers 4 --kill-every-ms 800 --runs 3]`
 *
 * The long chaos suite: the same driver as test/reliability/chaos.test.ts,
 * bigger and repeated. Prints one JSON report per run and exits 1 if any
 * invariant was violated.
 */
import { runChaos } from '../test/reliability/chaos'
import { numberFlag } from './args'

const argv = process.argv.slice(2)
const num = (flag: string, def: number) => numberFlag(argv, flag, def)

async function main() {
  const runs = num('--runs', 3)
  let failed = 0
  const all: number[] = []
  for (let r = 1; r <= runs; r++) {
    const report = await runChaos({
      stacks: num('--stacks', 20),
      rounds: num('--rounds', 8),
      workers: num('--workers', 4),
      killEveryMs: num('--kill-every-ms', 800),
      restartPostgres: true,
      log: argv.includes('--verbose') ? (l) => console.log(`  ${l}`) : undefined,
    })
    all.push(...report.recoveryMs)
    const sorted = [...report.recoveryMs].sort((a, b) => a - b)
    console.log(JSON.stringify({ run: r, ...report, recoveryMs: undefined, recoveryMedianMs: sorted[Math.floor(sorted.length / 2)] ?? null, recoveryMaxMs: sorted.at(-1) ?? null }))
    if (report.violations.length) failed++
  }
  all.sort((a, b) => a - b)
  console.log(`${runs} run(s), ${failed} with violations; kill -> locks broken: median ${all[Math.floor(all.length / 2)] ?? '-'} ms, max ${all.at(-1) ?? '-'} ms`)
  process.exit(failed ? 1 : 0)
}

void main()
