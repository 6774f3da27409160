/**
 * The production web process for browser tests: `server.ts` (Next's built UI,
 * the API and Socket.IO on one port) spawned exactly as `npm start` does,
 * against a TestCluster's database whose worker processes run the traversals.
 * The UI is built first when its sources changed (the same build stamp as
 * `npm start`).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { childEnv } from '../../lib/env'
import { createLogger } from '../../lib/logger'
import { ensureBuild } from '../../scripts/build-stamp'
import type { TestCluster } from './cluster'

export interface WebServer {
  url: string
  output: string[]
  close(): Promise<void>
}

export async function startWebServer(c: TestCluster): Promise<WebServer> {
  await ensureBuild(createLogger({ level: 'warn', format: 'text' }))
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
