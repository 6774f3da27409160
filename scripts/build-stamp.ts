/**
 * `npm start` builds the UI only when its sources changed since the last
 * build: a hash of the paths, sizes and modification times of everything
 * Next compiles is kept next to the build.
 */
import { spawn } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { childEnv } from '../lib/env'
import type { Logger } from '../lib/logger'

const INPUTS = ['app', 'components', 'lib', 'next.config.ts', 'package-lock.json', 'tsconfig.json']
const STAMP = path.join('.next', 'kiln-build-stamp')

function walk(p: string, out: string[]) {
  if (!fs.existsSync(p)) return
  const st = fs.statSync(p)
  if (st.isDirectory()) {
    if (p.endsWith('generated') || path.basename(p) === 'node_modules') return
    for (const f of fs.readdirSync(p).sort()) walk(path.join(p, f), out)
  } else out.push(`${p}:${st.size}:${Math.floor(st.mtimeMs)}`)
}

export function sourceStamp(): string {
  const files: string[] = []
  for (const p of INPUTS) walk(p, files)
  return crypto.createHash('sha256').update(files.join('\n')).digest('hex')
}

export async function ensureBuild(log: Logger): Promise<void> {
  const stamp = sourceStamp()
  if (fs.existsSync(path.join('.next', 'BUILD_ID')) && fs.existsSync(STAMP) && fs.readFileSync(STAMP, 'utf8') === stamp) return
  log.info('building the UI (first start, or the sources changed); this takes a little while')
  const started = Date.now()
  await new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, [path.join('node_modules', 'next', 'dist', 'bin', 'next'), 'build'], {
      stdio: ['ignore', 'inherit', 'inherit'],
      env: childEnv({ NEXT_TELEMETRY_DISABLED: '1', NODE_ENV: 'production' }),
    })
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`next build failed (exit ${code})`))))
  })
  fs.writeFileSync(STAMP, stamp)
  log.info(`UI built in ${((Date.now() - started) / 1000).toFixed(1)} s`)
}
