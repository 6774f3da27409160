/**
 * The bench's CPU split (bench/cpu.ts): ticks read from /proc turn into CPU
 * milliseconds per node and an idle share, and a busy process shows up.
 */
import { expect, test } from 'vitest'
import { cpuSnapshot, cpuUse } from '../../bench/cpu'

test('ticks become CPU milliseconds per node and the share of the cores left idle', () => {
  const before = { workers: 100, postgres: 50, bench: 10, idle: 1000, total: 2000 }
  const after = { workers: 130, postgres: 110, bench: 12, idle: 1300, total: 2400 }
  // 30 ticks of 10 ms over 100 nodes = 3 ms per node; 300 of 400 ticks idle.
  expect(cpuUse(before, after, 100)).toEqual({ workersMsPerNode: 3, postgresMsPerNode: 6, benchMsPerNode: 0.2, idleShare: 0.75 })
  expect(cpuUse(null, after, 100)).toBeNull()
})

// Kiln runs on Linux (the embedded PostgreSQL, CI on Debian), where /proc is there to read.
test('a process that spins counts as busy, and the machine as less idle', () => {
  const before = cpuSnapshot([process.pid])
  expect(before).not.toBeNull()
  const until = Date.now() + 150
  let x = 0
  while (Date.now() < until) x += Math.sqrt(x + 1)
  const after = cpuSnapshot([process.pid])!
  expect(x).toBeGreaterThan(0)
  // This process is both the "worker" and the bench here: at least ~100 ms of CPU each.
  expect(after.workers - before!.workers).toBeGreaterThanOrEqual(8)
  expect(after.bench - before!.bench).toBeGreaterThanOrEqual(8)
  const use = cpuUse(before!, after, 1)!
  expect(use.idleShare).toBeLessThan(1)
})
