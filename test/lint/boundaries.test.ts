/**
 * The import boundaries of .dependency-cruiser.cjs hold by any path, not only
 * for direct imports: a module of a pure layer that reaches the database
 * through another pure module fails `npm run lint`. Planted in a scratch tree
 * with Kiln's layout, checked with Kiln's own rules.
 */
import fs from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { cruise, type ICruiseResult, type IConfiguration } from 'dependency-cruiser'
import { afterAll, expect, test } from 'vitest'

const require = createRequire(import.meta.url)
const config = require('../../.dependency-cruiser.cjs') as IConfiguration
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-boundaries-'))
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }))

/** Write `files` (path → imports) under a fresh folder and cruise it with Kiln's rules. */
async function violations(name: string, files: Record<string, string[]>) {
  const root = path.join(scratch, name)
  for (const [file, imports] of Object.entries(files)) {
    const at = path.join(root, file)
    fs.mkdirSync(path.dirname(at), { recursive: true })
    const lines = imports.map((to, i) => `import * as m${i} from '${path.relative(path.dirname(at), path.join(root, to)).replace(/^(?!\.)/, './').replace(/\.ts$/, '')}'\nvoid m${i}`)
    fs.writeFileSync(at, lines.join('\n') + '\nexport const here = 1\n')
  }
  const tops = [...new Set(Object.keys(files).map((f) => f.split('/')[0]!))]
  const out = await cruise(tops, {
    baseDir: root,
    validate: true,
    ruleSet: { forbidden: config.forbidden },
    doNotFollow: { path: 'node_modules' },
    enhancedResolveOptions: { extensions: ['.ts'] },
    tsPreCompilationDeps: true,
  })
  const result = out.output as ICruiseResult
  return result.summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`)
}

test('the engine reaching the database through a pure module fails', async () => {
  const found = await violations('engine-via-template', {
    'lib/engine/run.ts': ['lib/template/helper.ts'],
    'lib/template/helper.ts': ['lib/db/client.ts'],
    'lib/db/client.ts': [],
  })
  expect(found).toContain('pure-layers-stay-pure: lib/engine/run.ts → lib/db/client.ts')
})

test('the engine reaching the services through the evaluation pool fails', async () => {
  const found = await violations('engine-via-evaluation', {
    'lib/engine/check.ts': ['lib/plan/model.ts'],
    'lib/plan/model.ts': ['lib/evaluation/bounded.ts'],
    'lib/evaluation/bounded.ts': ['lib/services/stacks.ts'],
    'lib/services/stacks.ts': [],
  })
  expect(found).toEqual(expect.arrayContaining([
    'pure-layers-stay-pure: lib/engine/check.ts → lib/evaluation/bounded.ts',
    'pure-layers-stay-pure: lib/engine/check.ts → lib/services/stacks.ts',
    'evaluation-reaches-only-pure-layers: lib/evaluation/bounded.ts → lib/services/stacks.ts',
  ]))
})

test('a layered tree passes', async () => {
  const found = await violations('layered', {
    'worker/main.ts': ['lib/services/stacks.ts', 'lib/evaluation/bounded.ts'],
    'lib/services/stacks.ts': ['lib/db/client.ts', 'lib/plan/model.ts', 'lib/evaluation/bounded.ts'],
    'lib/evaluation/bounded.ts': ['lib/plan/model.ts', 'lib/engine/ports.ts'],
    'lib/plan/model.ts': ['lib/engine/graph.ts', 'lib/template/index.ts'],
    'lib/engine/graph.ts': ['lib/template/index.ts', 'lib/resources/types.ts'],
    'lib/engine/ports.ts': [],
    'lib/template/index.ts': [],
    'lib/resources/types.ts': [],
    'lib/db/client.ts': ['lib/engine/ports.ts'],
  })
  expect(found).toEqual([])
})
