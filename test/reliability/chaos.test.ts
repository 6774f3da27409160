/**
 * Chaos, short version (the long one: `npm run chaos`): workers SIGKILLed at
 * random, PostgreSQL down for 2.5 s mid-run and again at the end while every
 * worker idles (each time followed by new stacks; the second time by a delete
 * too), overlapping updates, failing updates, cancels; every stack must end as
 * its last accepted operation asked, with no lock left to a dead owner, no
 * duplicated or leaked file, no traversal left running and a gap-free event
 * sequence per stack.
 */
import { expect, test } from 'vitest'
import { runChaos } from './chaos'

test('chaos: kills and PostgreSQL restarts during overlapping operations, new work after each; everything converges', { timeout: 300_000 }, async () => {
  const lines: string[] = []
  const report = await runChaos({ stacks: 6, rounds: 3, workers: 3, killEveryMs: 1500, restartPostgres: true, pgDownMs: 2500, log: (l) => lines.push(l) })
  console.log(`chaos: ${JSON.stringify({ ...report, recoveryMs: undefined, recoveryMaxMs: Math.max(0, ...report.recoveryMs), recoveryMedianMs: report.recoveryMs.sort((a, b) => a - b)[Math.floor(report.recoveryMs.length / 2)] ?? null })}`)
  if (report.violations.length) console.log(lines.join('\n'))
  expect(report.violations).toEqual([])
  expect(report.kills).toBeGreaterThan(0)
  expect(report.postgresRestarts).toBe(2)
  expect(report.stacksAfterRestart).toBeGreaterThan(0)
})
