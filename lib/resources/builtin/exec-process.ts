/**
 * Running one command of a Kiln::Exec resource: JSON on its stdin, its
 * stdout and stderr read back, a time limit, and an abort that reaches every
 * process it started.
 *
 * The command runs under a guard (./exec-guard.mjs), the leader of a new
 * process group: an abort (cancel, preempt, timeout, shutdown) sends SIGTERM
 * to the group and SIGKILL after a grace period; the worker dying closes the
 * guard's control socket and the guard does the same by itself. So no
 * process a command started survives the command, its abort or its worker,
 * unless it left the group on purpose (setsid).
 *
 * The environment is made afresh (never the worker's own, which holds
 * Kiln's database URL): PATH, HOME (the working directory), LANG, what the
 * resource names, and the KILN_* variables that say which action this is.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import type { Socket } from 'node:net'

/** What stdout may hold at most: a command's result is JSON for attributes, not a log. */
export const MAX_STDOUT_BYTES = 1024 * 1024
/** The end of stderr kept, for a failure's reason and the stderr attribute. */
export const STDERR_TAIL_BYTES = 4096
/** Between SIGTERM and SIGKILL of a command's process group. */
export const KILL_GRACE_MS = 5000

export interface CommandRun {
  argv: string[]
  cwd: string
  env: Record<string, string>
  stdin: string
  timeoutMs: number
  signal: AbortSignal
  graceMs?: number
}

export type CommandOutcome =
  | { kind: 'exited'; code: number; stdout: string; stderr: string }
  | { kind: 'killed'; signal: string; stdout: string; stderr: string }
  /** The program could not be started (ENOENT, EACCES). */
  | { kind: 'not-started'; code: string }
  | { kind: 'timed-out'; stderr: string }
  | { kind: 'aborted'; reason: unknown }
  | { kind: 'too-much-output' }

const guardPath = () => new URL('./exec-guard.mjs', import.meta.url).pathname

/** Run `argv` to its end (or its abort); never rejects for what the command did. */
export function runCommand(run: CommandRun): Promise<CommandOutcome> {
  const graceMs = run.graceMs ?? KILL_GRACE_MS
  const [program, ...args] = run.argv
  const child: ChildProcess = spawn(process.execPath, [guardPath(), String(graceMs), program!, ...args], {
    cwd: run.cwd,
    env: run.env as NodeJS.ProcessEnv,
    detached: true, // a new session and process group, led by the guard
    stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
  })
  const control = child.stdio[3] as Socket
  return new Promise((resolve) => {
    const stdout: Buffer[] = []
    let stdoutBytes = 0
    let stderr = Buffer.alloc(0)
    let report: { code?: number | null; signal?: string | null; error?: string } | null = null
    let stopped: CommandOutcome | null = null
    let controlText = ''

    const killGroup = (sig: NodeJS.Signals) => {
      try {
        if (child.pid) process.kill(-child.pid, sig)
      } catch {
        // gone already
      }
    }
    const stop = (why: CommandOutcome) => {
      if (stopped) return
      stopped = why
      killGroup('SIGTERM')
      // The guard sends SIGKILL itself; this is for a guard that is stuck.
      backstop = setTimeout(() => killGroup('SIGKILL'), graceMs + 1000)
    }
    let backstop: NodeJS.Timeout | undefined
    const timer = setTimeout(() => stop({ kind: 'timed-out', stderr: '' }), run.timeoutMs)
    const onAbort = () => stop({ kind: 'aborted', reason: run.signal.reason })
    if (run.signal.aborted) onAbort()
    else run.signal.addEventListener('abort', onAbort, { once: true })

    child.stdout!.on('data', (d: Buffer) => {
      stdoutBytes += d.length
      if (stdoutBytes > MAX_STDOUT_BYTES) return stop({ kind: 'too-much-output' })
      stdout.push(d)
    })
    child.stderr!.on('data', (d: Buffer) => {
      stderr = Buffer.concat([stderr, d])
      if (stderr.length > 2 * STDERR_TAIL_BYTES) stderr = stderr.subarray(stderr.length - STDERR_TAIL_BYTES)
    })
    control.on('data', (d: Buffer) => {
      controlText += d.toString()
      const line = controlText.split('\n')[0]
      if (controlText.includes('\n') && line) report = JSON.parse(line) as typeof report
    })
    control.on('error', () => {})
    // A command that does not read its input closes the pipe: that is not an error.
    child.stdin!.on('error', () => {})
    child.stdin!.end(run.stdin)
    child.on('error', (err) => stop({ kind: 'not-started', code: (err as NodeJS.ErrnoException).code ?? err.message }))

    child.on('close', () => {
      clearTimeout(timer)
      clearTimeout(backstop)
      run.signal.removeEventListener('abort', onAbort)
      const err = tail(stderr)
      const out = Buffer.concat(stdout).toString('utf8')
      if (stopped) return resolve(stopped.kind === 'timed-out' ? { kind: 'timed-out', stderr: err } : stopped)
      const r = report as typeof report
      if (!r) return resolve({ kind: 'killed', signal: 'SIGKILL', stdout: out, stderr: err })
      if (r.error) return resolve({ kind: 'not-started', code: r.error })
      if (r.signal) return resolve({ kind: 'killed', signal: r.signal, stdout: out, stderr: err })
      resolve({ kind: 'exited', code: r.code ?? 0, stdout: out, stderr: err })
    })
  })
}

/** The last STDERR_TAIL_BYTES of `buf` as text (cut on a line start when one is near). */
function tail(buf: Buffer): string {
  const text = buf.subarray(Math.max(0, buf.length - STDERR_TAIL_BYTES)).toString('utf8')
  return buf.length > STDERR_TAIL_BYTES ? `…${text.replace(/^[^\n]{0,200}\n/, '')}` : text
}
