/**
 * A real Chromium for UI tests: the one from Debian's `chromium` package (or
 * KILN_CHROMIUM_PATH), driven by playwright-core through `executablePath`.
 * Nothing is ever downloaded.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { chromium, type Browser } from 'playwright-core'
import { env } from '../../lib/env'

export function findChromium(): string | null {
  const e = env()
  if (e.KILN_CHROMIUM_PATH) return fs.existsSync(e.KILN_CHROMIUM_PATH) ? e.KILN_CHROMIUM_PATH : null
  for (const dir of (e.PATH ?? '').split(path.delimiter)) {
    for (const name of ['chromium', 'chromium-browser']) {
      const p = path.join(dir, name)
      if (dir && fs.existsSync(p)) return p
    }
  }
  return null
}

export async function launchChromium(executablePath: string): Promise<Browser> {
  return chromium.launch({
    executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
    env: { HOME: fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-chrome-')) },
  })
}
