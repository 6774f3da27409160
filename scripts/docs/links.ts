/**
 * Relative links in Markdown: every `[text](target)` outside code must point
 * at a file that exists and, with `#anchor`, at a heading of that file (by
 * GitHub's slug rule). External links (a scheme such as https:) are not
 * followed.
 */
import fs from 'node:fs'
import path from 'node:path'

/** GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2, … */
export function slugs(markdown: string): Set<string> {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  for (const line of withoutFences(markdown).split('\n')) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (!m) continue
    const base = m[1]!
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/ /g, '-')
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    out.add(n ? `${base}-${n}` : base)
  }
  return out
}

/** The text with fenced code blocks blanked out, lines kept (a `# comment` in a shell block is no heading). */
function withoutFences(markdown: string): string {
  return markdown.replace(/^[ \t]*(```+|~~~+)[^\n]*\n[\s\S]*?^[ \t]*\1[^\n]*$/gm, (block) => block.replace(/[^\n]/g, ' '))
}

/** The text with code blocks and inline code blanked out (links there are examples, not links). */
function withoutCode(markdown: string): string {
  return withoutFences(markdown).replace(/(`+)[^`\n]*?\1/g, (span) => ' '.repeat(span.length))
}

export interface Link {
  line: number
  target: string
}

export function links(markdown: string): Link[] {
  const out: Link[] = []
  withoutCode(markdown)
    .split('\n')
    .forEach((text, i) => {
      for (const m of text.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push({ line: i + 1, target: m[1]! })
    })
  return out
}

/**
 * Problems with the relative links of `file` (a path relative to `root`), as
 * `file:line: message`. `read` gives a file's text (tests pass generated text).
 */
export function brokenLinks(file: string, root: string, read: (file: string) => string | null = (f) => (fs.existsSync(path.join(root, f)) ? fs.readFileSync(path.join(root, f), 'utf8') : null)): string[] {
  const text = read(file)
  if (text === null) return [`${file}: missing`]
  const problems: string[] = []
  for (const { line, target } of links(text)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue // https:, mailto:
    const [pathPart, anchor] = target.split('#', 2) as [string, string | undefined]
    const dest = pathPart ? path.posix.normalize(path.posix.join(path.posix.dirname(file), decodeURI(pathPart))) : file
    if (dest.startsWith('..')) {
      problems.push(`${file}:${line}: ${target} leaves the repository`)
      continue
    }
    const abs = path.join(root, dest)
    const isDir = fs.existsSync(abs) && fs.statSync(abs).isDirectory()
    const destText = isDir ? null : read(dest)
    if (!isDir && destText === null) {
      problems.push(`${file}:${line}: ${target}: no such file (${dest})`)
      continue
    }
    if (anchor !== undefined && destText !== null && dest.endsWith('.md') && !slugs(destText).has(anchor)) {
      problems.push(`${file}:${line}: ${target}: ${dest} has no heading with the anchor #${anchor}`)
    }
  }
  return problems
}

/** README.md and every Markdown file under docs/, relative to `root`. */
export function markdownFiles(root: string): string[] {
  const out = ['README.md']
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(path.join(root, dir), { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const rel = path.posix.join(dir, e.name)
      if (e.isDirectory()) walk(rel)
      else if (e.name.endsWith('.md')) out.push(rel)
    }
  }
  walk('docs')
  return out
}

/** Tables whose rows have a different number of cells from their header (they render broken), as `file:line`. */
export function raggedTables(file: string, markdown: string): string[] {
  const cells = (row: string) => row.trim().replace(/^\||\|$/g, '').split(/(?<!\\)\|/).length
  const problems: string[] = []
  let header: number | null = null
  withoutFences(markdown)
    .split('\n')
    .forEach((line, i) => {
      if (!line.trim().startsWith('|')) return void (header = null)
      if (header === null) header = cells(line)
      else if (cells(line) !== header) problems.push(`${file}:${i + 1}: ${cells(line)} cells where the header has ${header}`)
    })
  return problems
}

/** A code fence opened and never closed swallows the rest of the page. */
export function unclosedFence(file: string, markdown: string): string[] {
  let open: number | null = null
  markdown.split('\n').forEach((line, i) => {
    if (/^[ \t]*(```|~~~)/.test(line)) open = open === null ? i + 1 : null
  })
  return open === null ? [] : [`${file}:${open}: a code fence is never closed`]
}
