// The guard of one Kiln::Exec command (./exec-process.ts): the leader of the command's process group,
// so that nothing the command starts outlives it, even when the worker that started it dies.
//
//   node exec-guard.mjs <grace ms> <program> [args...]
//
// The command inherits the guard's stdin, stdout and stderr (the worker's pipes). File descriptor 3 is
// a socket to the worker: the guard writes one JSON line there when the command ends
// ({"code": n, "signal": s} or {"error": "ENOENT"}), and reads nothing from it but its end. The worker
// dying (even by SIGKILL) closes it: the guard then stops the group as on an abort. Stopping sends
// SIGTERM to the group, and SIGKILL `grace ms` later. When the command ends, whatever it left
// running in its group is killed at once (the guard with it, after its report is written).
// Plain JavaScript: it starts in tens of milliseconds, without the TypeScript loader.
import { spawn } from 'node:child_process'
import net from 'node:net'

const [graceArg, program, ...args] = process.argv.slice(2)
const graceMs = Number(graceArg)
const group = -process.pid
const control = new net.Socket({ fd: 3, readable: true, writable: true })

const signalGroup = (sig) => {
  try {
    process.kill(group, sig)
  } catch {
    // the group is gone already
  }
}

let stopping = false
function stop() {
  if (stopping) return
  stopping = true
  signalGroup('SIGTERM')
  setTimeout(() => signalGroup('SIGKILL'), graceMs)
}

// The worker's abort reaches the whole group; the guard outlives SIGTERM to send the SIGKILL.
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
process.on('SIGHUP', stop)
control.on('data', () => {})
control.on('end', stop)
control.on('close', stop)
control.on('error', stop)

function report(outcome) {
  // Killing the group ends the guard too: only once the report is written (or cannot be).
  const end = () => signalGroup('SIGKILL')
  if (control.destroyed || !control.writable) return end()
  control.write(`${JSON.stringify(outcome)}\n`, end)
  setTimeout(end, 1000)
}

const child = spawn(program, args, { stdio: 'inherit' })
child.on('error', (err) => report({ error: err.code ?? String(err.message) }))
child.on('exit', (code, signal) => report({ code, signal }))
