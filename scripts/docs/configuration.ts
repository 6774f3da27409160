/**
 * docs/reference/configuration.md from lib/env.ts: every key of the schema in
 * order, its meaning from the doc comment above it (read with the TypeScript
 * compiler API), its kind from how the schema builds it, and its default from
 * parsing an empty environment. A key without a doc comment is an error, so a
 * new variable cannot go undocumented.
 */
import fs from 'node:fs'
import ts from 'typescript'
import { parseEnv } from '../../lib/env'
import { code, generatedHeader, table } from './markdown'

export const ENV_SOURCE = 'lib/env.ts'

export interface EnvKey {
  name: string
  /** the doc comment, as one paragraph */
  doc: string
  /** the schema expression, as written */
  expression: string
}

/** The keys of `EnvSchema = z.object({...})` in lib/env.ts, with their doc comments. */
export function envKeys(source = fs.readFileSync(ENV_SOURCE, 'utf8')): EnvKey[] {
  const file = ts.createSourceFile(ENV_SOURCE, source, ts.ScriptTarget.ES2022, true)
  let object: ts.ObjectLiteralExpression | undefined
  const visit = (node: ts.Node) => {
    if (ts.isVariableDeclaration(node) && node.name.getText(file) === 'EnvSchema' && node.initializer && ts.isCallExpression(node.initializer)) {
      const arg = node.initializer.arguments[0]
      if (arg && ts.isObjectLiteralExpression(arg)) object = arg
    }
    ts.forEachChild(node, visit)
  }
  visit(file)
  if (!object) throw new Error(`${ENV_SOURCE}: no \`const EnvSchema = z.object({...})\` found`)
  return object.properties.map((p) => {
    if (!ts.isPropertyAssignment(p)) throw new Error(`${ENV_SOURCE}: unexpected member ${p.getText(file)}`)
    const name = p.name.getText(file)
    const doc = ts
      .getJSDocCommentsAndTags(p)
      .filter(ts.isJSDoc)
      .map((d) => ts.getTextOfJSDocComment(d.comment) ?? '')
      .join(' ')
      .replace(/\s+/g, ' ')
      .trim()
    if (!doc) throw new Error(`${ENV_SOURCE}: ${name} has no doc comment (/** … */ above it); every variable is documented in docs/reference/configuration.md from it`)
    return { name, doc, expression: p.initializer.getText(file).replace(/\s+/g, '') }
  })
}

/** What values a key takes, from the helper that builds it. */
function kind(expression: string): string {
  if (expression.startsWith('int(')) return 'integer'
  if (expression.startsWith('bool(')) return 'boolean (1/0, true/false, yes/no)'
  if (expression.startsWith('optionalUrl')) return 'postgres:// URL'
  const values = /^z\.enum\(\[([^\]]*)\]\)/.exec(expression)?.[1]
  if (values) return `one of ${values.split(',').map((v) => code(v.replace(/['"]/g, ''))).join(', ')}`
  if (expression.includes('.url()')) return 'URL'
  if (expression.includes('.regex(/^\\d+$/)')) return 'integer'
  return 'string'
}

export function configurationReference(): string {
  const defaults = parseEnv({}) as unknown as Record<string, unknown>
  const rows = envKeys().map((k) => {
    const d = defaults[k.name]
    return [code(k.name), kind(k.expression), d === undefined || (Array.isArray(d) && d.length === 0) ? 'unset' : code(String(d)), k.doc]
  })
  return [
    generatedHeader('Configuration variables', [ENV_SOURCE]),
    'Every process reads its settings from environment variables, parsed once at start by `lib/env.ts`;',
    'a bad value stops the process with a message naming the variable. `npm start` passes its own',
    'environment on to the web server and the workers it launches.',
    '',
    'The defaults below are what an empty environment parses to ("unset": no value, the meaning says what happens then).',
    '',
    table(['Variable', 'Takes', 'Default', 'Meaning'], rows),
    '',
  ].join('\n')
}
