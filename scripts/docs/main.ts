/**
 * `npm run docs`: write the generated references under docs/reference from
 * the code they describe (OpenAPI document, CLI definitions, env schema,
 * resource types, template versions, Heat router), then check every relative
 * link of README.md and docs/. `npm run docs -- --check` writes nothing and
 * fails if a generated file is stale.
 */
import fs from 'node:fs'
import path from 'node:path'
import { generatedDocs } from './generate'
import { brokenLinks, markdownFiles } from './links'

const check = process.argv.includes('--check')
let stale = 0
for (const [file, text] of generatedDocs()) {
  const current = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : null
  if (current === text) continue
  if (check) {
    console.error(`${file} is stale: run npm run docs`)
    stale++
    continue
  }
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, text)
  console.log(`wrote ${file}`)
}
const broken = markdownFiles('.').flatMap((f) => brokenLinks(f, '.'))
for (const b of broken) console.error(b)
if (stale || broken.length) process.exit(1)
console.log('docs are current; every relative link resolves')
