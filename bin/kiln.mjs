#!/usr/bin/env node
// The `kiln` command (package.json "bin"): runs the TypeScript CLI through tsx.
import { register } from 'tsx/esm/api'

register()
const { run } = await import('../lib/cli/main.ts')
await run()
