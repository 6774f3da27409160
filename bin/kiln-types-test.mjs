#!/usr/bin/env node
// The `kiln-types-test` command (package.json "bin"): the conformance kit for a resource provider.
import { register } from 'tsx/esm/api'

register()
const { run } = await import('../lib/cli/types-test.ts')
await run()
