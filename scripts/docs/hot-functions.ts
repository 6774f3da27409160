/**
 * docs/reference/hot-functions.md from lib/template/versions.ts: the
 * heat_template_version values Kiln accepts and the version each intrinsic
 * function needs, and the functions it refuses (with the message the user
 * gets). What each function does is in docs/guide/templates.md.
 */
import { CONDITION_ONLY, CONDITIONS_SINCE, FUNCTION_CHANGES, FUNCTION_SINCE, IN_CONDITION, UNSUPPORTED_FUNCTIONS, VERSIONS } from '../../lib/template/versions'
import { code, generatedHeader, table } from './markdown'

export const HOT_SOURCES = ['lib/template/versions.ts']

export function hotFunctionsReference(): string {
  const fns = Object.entries(FUNCTION_SINCE).sort(([a, va], [b, vb]) => (va === vb ? a.localeCompare(b) : va < vb ? -1 : 1))
  return [
    generatedHeader('HOT versions and functions', HOT_SOURCES),
    'What each function does, with examples: [templates guide](../guide/templates.md#intrinsic-functions).',
    '',
    '## heat_template_version',
    '',
    'A template names one of these, by date or by release name. A function used in a template older than its',
    'version is refused with a message naming the version it needs.',
    '',
    table(['Date', 'Release name'], VERSIONS.map((v) => [code(v.date), v.name ? code(v.name) : ''])),
    '',
    `The \`conditions\` section and a resource's or output's \`condition\` need ${code(CONDITIONS_SINCE)} or later.`,
    '',
    '## Functions',
    '',
    table(['Function', 'Available from', 'Where'], fns.map(([name, since]) => [code(name), code(since), CONDITION_ONLY.has(name) ? 'conditions only' : IN_CONDITION.has(name) ? 'anywhere' : 'outside conditions'])),
    '',
    'As in Heat, `equals`, `not`, `and` and `or` are refused outside a condition, and inside one only they, `get_param` and `contains` may be used.',
    '',
    '## Changes by version',
    '',
    table(['Function', 'From', 'Change'], FUNCTION_CHANGES.map((c) => [code(c.fn), code(c.since), c.change])),
    '',
    '## Refused',
    '',
    'These are Heat functions Kiln does not evaluate. A template that uses one is refused at validation, with',
    'this message at the function\'s path:',
    '',
    table(['Function', 'Message'], Object.entries(UNSUPPORTED_FUNCTIONS).map(([name, message]) => [code(name), message])),
    '',
    'CloudFormation-style functions (`Fn::…`, `Ref`) are refused too, with a pointer to the HOT equivalent.',
    '',
  ].join('\n')
}
