import { createHash } from 'node:crypto'

/**
 * The hand-written SQL of lib/db/functions as a set of named statements, so
 * that a migration can carry only the statements that changed.
 *
 * A statement's identity is what it defines: `function:<name>` for
 * `CREATE OR REPLACE FUNCTION`, `index:<name>` for `CREATE INDEX`, and its own
 * text for anything else. Its comparable text leaves out the comments in
 * front of it (they document the source and change nothing in the database);
 * comments inside a function body are part of the function and count.
 */

export interface Statement {
  /** what the statement defines (see above) */
  key: string
  /** the statement as written, with the comment lines in front of it */
  text: string
  /** the statement without the comments in front of it: what is compared */
  body: string
}

/**
 * Split SQL into statements at top-level semicolons, minding quoted strings,
 * quoted identifiers, dollar-quoted bodies and comments.
 */
export function splitStatements(sql: string): string[] {
  const out: string[] = []
  let start = 0
  let i = 0
  const n = sql.length
  while (i < n) {
    const c = sql[i]!
    if (c === '-' && sql[i + 1] === '-') {
      const eol = sql.indexOf('\n', i)
      i = eol === -1 ? n : eol + 1
    } else if (c === '/' && sql[i + 1] === '*') {
      const end = sql.indexOf('*/', i + 2)
      i = end === -1 ? n : end + 2
    } else if (c === "'" || c === '"') {
      let j = i + 1
      while (j < n && !(sql[j] === c && sql[j + 1] !== c)) j += sql[j] === c ? 2 : 1
      i = j + 1
    } else if (c === '$') {
      const tag = /^\$[A-Za-z_0-9]*\$/.exec(sql.slice(i, i + 64))?.[0]
      if (tag) {
        const end = sql.indexOf(tag, i + tag.length)
        i = end === -1 ? n : end + tag.length
      } else i++
    } else if (c === ';') {
      out.push(sql.slice(start, i + 1))
      start = i + 1
      i++
    } else i++
  }
  const rest = sql.slice(start)
  if (rest.trim()) out.push(rest)
  return out.map((s) => s.replace(/^\s*\n/, '').trimEnd()).filter((s) => stripLeadingComments(s) !== '')
}

function stripLeadingComments(s: string): string {
  let t = s.trimStart()
  for (;;) {
    if (t.startsWith('--')) {
      const eol = t.indexOf('\n')
      t = eol === -1 ? '' : t.slice(eol + 1).trimStart()
    } else if (t.startsWith('/*')) {
      const end = t.indexOf('*/')
      t = end === -1 ? '' : t.slice(end + 2).trimStart()
    } else return t.trimEnd()
  }
}

/** What a statement defines; `drop:` keys undo a definition. */
export function statementKey(body: string): string {
  const head = body.replace(/\s+/g, ' ').slice(0, 300)
  let m = /^CREATE (?:OR REPLACE )?FUNCTION ([\w.]+)\s*\(/i.exec(head)
  if (m) return `function:${m[1]!.toLowerCase()}`
  m = /^CREATE (?:UNIQUE )?INDEX (?:CONCURRENTLY )?(?:IF NOT EXISTS )?([\w.]+)/i.exec(head)
  if (m) return `index:${m[1]!.toLowerCase()}`
  m = /^DROP FUNCTION (?:IF EXISTS )?([\w.]+)/i.exec(head)
  if (m) return `drop:function:${m[1]!.toLowerCase()}`
  m = /^DROP INDEX (?:IF EXISTS )?([\w.]+)/i.exec(head)
  if (m) return `drop:index:${m[1]!.toLowerCase()}`
  return `sql:${createHash('sha256').update(body).digest('hex').slice(0, 16)}`
}

export function parseStatements(sql: string): Statement[] {
  return splitStatements(sql).map((text) => {
    const body = stripLeadingComments(text)
    return { key: statementKey(body), text, body }
  })
}

/** The SQL that removes what `key` defines. */
export function dropFor(key: string): string {
  if (key.startsWith('function:')) return `DROP FUNCTION IF EXISTS ${key.slice('function:'.length)};`
  if (key.startsWith('index:')) return `DROP INDEX IF EXISTS ${key.slice('index:'.length)};`
  // Anything else cannot be undone by a generated statement: the migration
  // says so, and the marker lets the replay of the migrations forget it.
  return `-- kiln:forget ${key} (no longer in lib/db/functions; undo it by hand above if it matters)`
}
