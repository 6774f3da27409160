/**
 * Where a phase's CPU went: the workers, PostgreSQL's processes, this bench
 * process (the service calls), and how much of the machine stayed idle.
 * Read from /proc (Linux) before and after the phase, so it costs nothing
 * while the phase runs; off Linux, or where /proc cannot be read, it is null.
 *
 * "PostgreSQL" is every process named postgres on this machine: the embedded
 * cluster's (a server elsewhere, through DATABASE_URL, counts as 0). A
 * backend that exits during the phase takes its CPU with it; the engine's
 * connections are pooled and live across phases, so that is rare. The
 * figures are in clock ticks of 10 ms, so a phase of a few hundred nodes
 * reads to about ±0.05 ms per node.
 */
import fs from 'node:fs'
import os from 'node:os'

export interface CpuSnapshot {
  /** clock ticks per process group */
  workers: number
  postgres: number
  bench: number
  /** machine-wide idle ticks (all cores) and total ticks */
  idle: number
  total: number
}

export interface CpuUse {
  /** CPU milliseconds per graph node */
  workersMsPerNode: number
  postgresMsPerNode: number
  benchMsPerNode: number
  /** share of all cores' time that stayed idle during the phase, 0..1 */
  idleShare: number
}

// USER_HZ: 100 on every Linux that Node supports; /proc reports in these ticks.
const TICK_MS = 10

function procTicks(pid: number): { comm: string; ticks: number } | null {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    // comm is parenthesised and may contain spaces; the fields after it are space-separated.
    const close = text.lastIndexOf(')')
    const comm = text.slice(text.indexOf('(') + 1, close)
    const rest = text.slice(close + 2).split(' ')
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after comm.
    return { comm, ticks: Number(rest[11]) + Number(rest[12]) }
  } catch {
    return null
  }
}

export function cpuSnapshot(workerPids: number[]): CpuSnapshot | null {
  if (os.platform() !== 'linux') return null
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number)
    // user nice system idle iowait irq softirq steal
    const total = line.slice(0, 8).reduce((a, b) => a + b, 0)
    const idle = line[3]! + line[4]!
    let postgres = 0
    for (const name of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(name)) continue
      const p = procTicks(Number(name))
      if (p?.comm.startsWith('postgres')) postgres += p.ticks
    }
    let workers = 0
    for (const pid of workerPids) workers += procTicks(pid)?.ticks ?? 0
    const bench = procTicks(process.pid)?.ticks ?? 0
    return { workers, postgres, bench, idle, total }
  } catch {
    return null
  }
}

export function cpuUse(before: CpuSnapshot | null, after: CpuSnapshot | null, nodes: number): CpuUse | null {
  if (!before || !after) return null
  const per = (a: number, b: number) => Math.round((((b - a) * TICK_MS) / Math.max(1, nodes)) * 100) / 100
  const total = after.total - before.total
  return {
    workersMsPerNode: per(before.workers, after.workers),
    postgresMsPerNode: per(before.postgres, after.postgres),
    benchMsPerNode: per(before.bench, after.bench),
    idleShare: total > 0 ? Math.round(((after.idle - before.idle) / total) * 100) / 100 : 0,
  }
}
