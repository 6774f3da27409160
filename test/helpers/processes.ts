/** Processes a test started through Kiln (Kiln::Exec's commands), seen from outside. */
import fs from 'node:fs'

/** Alive and not a zombie (a killed process may wait to be reaped by whoever adopted it). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return false
  }
}

/** The pids a command wrote to `file`, one per line (none when it has not written it yet). */
export const pidsIn = (file: string): number[] => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number) : [])
