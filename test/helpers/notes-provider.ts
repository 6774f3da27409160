/** The example Notes provider (examples/notes/provider.mjs), started as its script starts it: a process of its own on a free port. */
import { spawn, type ChildProcess } from 'node:child_process'
import { childEnv } from '../../lib/env'

export async function startNotesProvider(dir: string, secret: string): Promise<{ url: string; proc: ChildProcess }> {
  const proc = spawn(process.execPath, ['examples/notes/provider.mjs'], { env: childEnv({ NOTES_PORT: '0', NOTES_DIR: dir, NOTES_SECRET: secret }), stdio: ['ignore', 'pipe', 'inherit'] })
  const url = await new Promise<string>((resolve, reject) => {
    proc.stdout!.on('data', (d: Buffer) => {
      const m = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(d.toString())
      if (m) resolve(m[1]!)
    })
    proc.on('exit', (code) => reject(new Error(`the Notes provider exited (${code})`)))
  })
  return { url, proc }
}
