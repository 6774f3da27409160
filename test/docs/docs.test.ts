/**
 * The documentation stays true to the code: the generated references
 * (docs/reference, `npm run docs`) equal what the generator makes from the
 * code now; every relative link of README.md and docs/ resolves, to a file
 * and, with #anchor, to a heading; tables and code fences render; every package of
 * package.json and every KILN_MAX_* limit is documented; and no page speaks
 * of the history of the work instead of the product.
 */
import fs from 'node:fs'
import { describe, expect, test } from 'vitest'
import { envKeys } from '../../scripts/docs/configuration'
import { generatedDocs } from '../../scripts/docs/generate'
import { brokenLinks, links, markdownFiles, raggedTables, slugs, unclosedFence } from '../../scripts/docs/links'

const root = process.cwd()
const pages = markdownFiles(root)
const read = (f: string) => fs.readFileSync(f, 'utf8')

describe('generated references', () => {
  for (const [file, text] of generatedDocs()) {
    test(`${file} is current (run \`npm run docs\` after changing its source)`, () => {
      expect(fs.existsSync(file), `${file} is missing`).toBe(true)
      expect(read(file)).toBe(text)
    })
  }
})

describe('links and tables', () => {
  test('every relative link of README.md and docs/**/*.md points at a file, and an anchor at a heading', () => {
    expect(pages.length).toBeGreaterThan(10)
    expect(pages.flatMap((f) => brokenLinks(f, root))).toEqual([])
  })

  test('the link check finds a missing file, a missing anchor and a link that leaves the repository', () => {
    const files: Record<string, string> = {
      'docs/a.md': '# Title\n\n## Two words\n\n[ok](b.md#the-end) [ok](#two-words) [bad](c.md) [bad](b.md#nowhere) [out](../../x.md) `[code](c.md)`\n\n```\n[fenced](c.md)\n```\n',
      'docs/b.md': '# The end\n',
    }
    const problems = brokenLinks('docs/a.md', root, (f) => files[f] ?? null)
    expect(problems).toEqual([
      'docs/a.md:5: c.md: no such file (docs/c.md)',
      'docs/a.md:5: b.md#nowhere: docs/b.md has no heading with the anchor #nowhere',
      'docs/a.md:5: ../../x.md leaves the repository',
    ])
    expect([...slugs('# `GET /api/stacks`\n## Same\n## Same\n')]).toEqual(['get-apistacks', 'same', 'same-1'])
    expect(links('[a](x.md) `[b](y.md)`').map((l) => l.target)).toEqual(['x.md'])
  })

  test('every code fence is closed', () => {
    expect(unclosedFence('f.md', '# A\n```sh\nls\n```\n\n```\nopen\n')).toEqual(['f.md:6: a code fence is never closed'])
    expect(pages.flatMap((f) => unclosedFence(f, read(f)))).toEqual([])
  })

  test('every table row has as many cells as its header', () => {
    expect(raggedTables('t.md', '| a | b |\n|---|---|\n| 1 | 2 \\| 3 |\n| 1 | 2 | 3 |\n')).toEqual(['t.md:4: 3 cells where the header has 2'])
    expect(pages.flatMap((f) => raggedTables(f, read(f)))).toEqual([])
  })
})

describe('completeness', () => {
  test('docs/dependencies.md says why for every dependency and devDependency of package.json', () => {
    const pkg = JSON.parse(read('package.json')) as { dependencies: Record<string, string>; devDependencies: Record<string, string> }
    const page = read('docs/dependencies.md')
    const missing = [...Object.keys(pkg.dependencies), ...Object.keys(pkg.devDependencies)].filter((name) => !page.includes('`' + name + '`'))
    expect(missing).toEqual([])
  })

  test('docs/operations/limits.md covers every KILN_MAX_* variable', () => {
    const page = read('docs/operations/limits.md')
    const missing = envKeys().map((k) => k.name).filter((n) => n.startsWith('KILN_MAX_') && !page.includes('`' + n + '`'))
    expect(missing).toEqual([])
  })

  test('no page speaks of the history of the work (numbered sessions or rounds) instead of the product', () => {
    const history = /\b(sessions? \d+|rounds? \d+ of (the|past) work|(previous|earlier|this|last|next) session\b|sessions ago)/i
    const hits = pages.flatMap((f) =>
      read(f)
        .split('\n')
        .map((line, i) => ({ where: `${f}:${i + 1}`, line }))
        .filter(({ line }) => history.test(line)),
    )
    expect(hits).toEqual([])
  })
})
