#!/usr/bin/env node
// The `kiln` command (package.json "bin"): runs the TypeScript CLI through tsx.
import { register } from 'tsx/esm/api'

register()
await import('../lib/cli/main.ts')
