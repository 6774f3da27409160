/**
 * The production web process for browser tests: `server.ts` (Next's built UI,
 * the API and Socket.IO on one port) spawned exactly as `npm start` does,
 * against a TestCluster's database whose worker processes run the traversals.
 * The UI is built first when its sources changed (the same build stamp as
 * `npm start`).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { childEnv } from '../../lib/env'
import { createLogger } from '../../lib/logger'
import { ensureBuild } from '../../scripts/build-stamp'
import type { TestCluster } from './cluster'

export interface WebServer {
  url: string
  output: string[]
  close(): Promise<void>
}

/**
 * One UI build at a time: the browser suites run in parallel processes, and
 * two `next build`s into one .next would spoil each other. The lock is a
 * directory holding the builder's pid, outside .next (a build empties it);
 * one whose process is gone is taken over.
 */
async function oneBuildAtATime(build: () => Promise<void>): Promise<void> {
  const lock = path.join(os.tmpdir(), `kiln-ui-build-${crypto.createHash('sha256').update(process.cwd()).digest('hex').slice(0, 12)}`)
  const pidFile = path.join(lock, 'pid')
  for (;;) {
    try {
      fs.mkdirSync(lock)
      fs.writeFileSync(pidFile, String(process.pid))
      break
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
    const holder = Number(fs.existsSync(pidFile) ? fs.readFileSync(pidFile, 'utf8') : NaN)
    if (holder && !alive(holder)) fs.rmSync(lock, { recursive: true, force: true })
    else await new Promise((r) => setTimeout(r, 250))
  }
  try {
    await build()
  } finally {
    fs.rmSync(lock, { recursive: true, force: true })
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

export async function startWebServer(c: TestCluster): Promise<WebServer> {
  await oneBuildAtATime(() => ensureBuild(createLogger({ level: 'warn', format: 'text' })))
  const output: string[] = []
  const proc: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'server.ts'], {
    env: childEnv({ DATABASE_URL: c.url, NODE_ENV: 'production', PORT: '0', HOST: '127.0.0.1', NEXT_TELEMETRY_DISABLED: '1', KILN_LOG_LEVEL: 'warn', KILN_WORKSPACE_DIR: c.workspace }),
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  })
  proc.stdout?.on('data', (d: Buffer) => output.push(d.toString()))
  proc.stderr?.on('data', (d: Buffer) => output.push(d.toString()))
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`web server did not start:\n${output.join('')}`)), 60_000)
    proc.on('message', (m: { kind?: string; url?: string }) => {
      if (m.kind === 'ready' && m.url) {
        clearTimeout(timer)
        resolve(m.url)
      }
    })
    proc.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`web server exited (${code}):\n${output.join('')}`))
    })
  })
  return {
    url,
    output,
    async close() {
      if (proc.exitCode !== null) return
      const gone = new Promise((r) => proc.once('exit', r))
      proc.kill('SIGTERM')
      const t = setTimeout(() => proc.kill('SIGKILL'), 10_000)
      await gone
      clearTimeout(t)
    },
  }
}
