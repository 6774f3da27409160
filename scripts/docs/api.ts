/**
 * docs/reference/api.md from the OpenAPI document (lib/api/openapi.ts), which
 * itself takes its request bodies from the zod schemas the handlers validate
 * with: every route, its parameters, a summary of its body and its responses,
 * plus authentication and the error format from the document's components.
 */
import { openApiDocument } from '../../lib/api/openapi'
import { cell, code, generatedHeader, literal, table } from './markdown'

export const API_SOURCES = ['lib/api/openapi.ts', 'lib/api/schemas.ts', 'lib/plan/preview-types.ts']

type Schema = Record<string, unknown>

interface Operation {
  summary: string
  description?: string
  parameters?: { name: string; in: 'path' | 'query' | 'header'; required: boolean }[]
  requestBody?: { content: { 'application/json': { schema: Schema } } }
  security?: unknown[]
  responses: Record<string, { description?: string; $ref?: string }>
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const

/** A JSON Schema type as a short phrase: `string (1–255)`, `map`, `list of string`, `integer or null`. */
export function typeText(s: Schema): string {
  if (Array.isArray(s.anyOf)) return (s.anyOf as Schema[]).map(typeText).join(' or ')
  if (Array.isArray(s.enum)) return `one of ${(s.enum as unknown[]).map((v) => code(JSON.stringify(v))).join(', ')}`
  switch (s.type) {
    case 'object':
      return s.properties ? 'object' : 'map'
    case 'array':
      return `list of ${s.items ? typeText(s.items as Schema) : 'anything'}${bounds(s.minItems, s.maxItems, ' items')}`
    case 'string':
      return `string${bounds(s.minLength, s.maxLength, ' characters')}`
    case 'integer':
    case 'number':
      return `${s.type}${bounds(s.minimum, s.maximum, '')}`
    case undefined:
      return 'any'
    default:
      return String(s.type)
  }
}

function bounds(min: unknown, max: unknown, unit: string): string {
  if (min !== undefined && max !== undefined) return ` (${min}–${max}${unit})`
  if (min !== undefined) return ` (at least ${min}${unit})`
  if (max !== undefined) return ` (at most ${max}${unit})`
  return ''
}

function bodyTable(schema: Schema): string {
  const required = new Set((schema.required as string[] | undefined) ?? [])
  const props = Object.entries((schema.properties ?? {}) as Record<string, Schema>)
  const rows = props.map(([name, s]) => [code(name), typeText(s), required.has(name) ? 'yes' : '', literal(s.default)])
  const strict = schema.additionalProperties === false ? ' (any other field is refused with a 400 naming it)' : ''
  return `Body, a JSON object${strict}:\n\n${table(['Field', 'Type', 'Required', 'Default'], rows)}`
}

const anchorOf = (method: string, path: string) => `${method}-${path}`.toLowerCase().replace(/[^a-z0-9_ -]/g, '').replace(/ /g, '-')

export function apiReference(): string {
  const doc = openApiDocument() as {
    info: { description: string }
    components: { securitySchemes: Record<string, { type: string; in?: string; name?: string; scheme?: string; description?: string }>; responses: { Error: { description: string } }; schemas: { Preview: Schema } }
    paths: Record<string, Partial<Record<(typeof METHODS)[number], Operation>>>
  }
  const ops = Object.entries(doc.paths).flatMap(([path, byMethod]) => METHODS.filter((m) => byMethod[m]).map((m) => ({ method: m.toUpperCase(), path, op: byMethod[m]! })))
  const schemes = Object.entries(doc.components.securitySchemes).map(([name, s]) => [
    code(name),
    s.type === 'http' ? `${code('Authorization: Bearer <token>')}` : `${s.in} ${code(s.name)}`,
    s.description ?? '',
  ])
  const out = [
    generatedHeader('REST API reference', API_SOURCES),
    `${doc.info.description} The OpenAPI 3.1 document this page is generated from is served at`,
    '`GET /api/openapi.json`. Bodies are JSON; every body is validated once, at the boundary, and a',
    'field the route does not know is refused, never ignored. Answers over 2 KB (JSON, XML, text) come',
    'gzipped to a client whose `Accept-Encoding` names gzip. The Heat-compatible API is described in',
    '[heat-api.md](heat-api.md).',
    '',
    '## Authentication',
    '',
    'Every route needs credentials unless it is marked public. Send an API token in one of two headers, or',
    'use the browser session that `POST /api/session` starts:',
    '',
    table(['Scheme', 'Where', 'Notes'], schemes),
    '',
    'A request authenticated by the session cookie that changes state (anything but GET, HEAD, OPTIONS)',
    'must also send the session\'s CSRF token in `X-CSRF-Token` (`POST /api/session` and',
    '`GET /api/session` return it), and a browser `Origin` must be the server\'s own; otherwise 403.',
    'A token belongs to one project and sees only that project\'s stacks.',
    '',
    '## Errors',
    '',
    `${doc.components.responses.Error.description} The body is`,
    '',
    '```json',
    '{ "error": { "code": "validation_failed",',
    '             "message": "resources.network.properties.valu (line 21, column 7): Unknown Property valu; did you mean value?",',
    '             "issues": [ { "code": "property", "path": "resources.network.properties.valu", "line": 21, "column": 7,',
    '                           "message": "Unknown Property valu; did you mean value?" } ] } }',
    '```',
    '',
    '`issues` comes with template and parameter problems; `line` and `column` are null when the template was sent',
    'as a JSON object rather than text. A 413 carries `limit` (which one) and `max` instead.',
    '',
    table(
      ['Status', 'When'],
      [
        ['400', 'bad input: a malformed body or query, a template or parameter problem (with `issues`), a value of the wrong format'],
        ['401', 'no credentials, or a token or session that is unknown, revoked or expired'],
        ['403', 'a CSRF check failed, or an admin-only route was called with a member token'],
        ['404', 'no such route, or no such stack **in your project**: another project\'s stack is answered exactly like a missing one'],
        ['405', 'the path exists but not with this method (the `Allow` header lists the methods)'],
        ['409', 'the operation cannot proceed in the stack\'s state (cancel with nothing running, a duplicate name), or an update or a plan is stale: the stack moved to another version since (`expected`, `current`, `since`, `diff`; a plan\'s changed rows in `rows`)'],
        ['410', 'a saved plan expired (`code`: `plan_expired`)'],
        ['413', 'a size limit was exceeded; the message names it (see [limits](../operations/limits.md))'],
        ['415', 'a body that is not JSON'],
        ['500', 'a fault in Kiln; the details are in the server log, never in the response'],
      ],
    ),
    '',
    'Hidden parameter values, secret attributes and every value a template makes from them are masked (`******`) in every response. An output made from one is `sensitive: true`: its value is shown only by `GET /api/stacks/{stack}/outputs/{key}?reveal=true`.',
    '',
    '## Editing safely: `expect`, `If-Match` and "no changes"',
    '',
    '`GET /api/stacks/{stack}` answers with an `ETag` header naming the stack\'s template version (a quoted',
    'template id). An update (`PUT` or `PATCH`) may send it back as `If-Match`, or send `expect` in the body',
    '(a traversal id or a template id of the stack): the version the edit was written against. If the stack',
    'moved to another template since (another update, a rollback), the update is refused with 409 and starts',
    'nothing; the body says what changed meanwhile: `expected`, `current`, `since` (the operations started',
    'since) and `diff` (`template` and `environment` as unified diffs, `parameters` one by one, hidden values',
    'masked). To supersede a running update deliberately, send the version it runs (the one `GET` shows while',
    'it runs). An unchanged submission (same template, environment, parameters and settings, and a stack that',
    'did not fail) answers 200 with `noChanges: true` and starts nothing, unless the body says `force: true`.',
    'Heat\'s API has no `expect` and starts every update it is sent, as Heat does.',
    '',
    '## The preview\'s format',
    '',
    '`POST /api/stacks/{stack}/preview` answers, and a saved plan\'s `preview` holds, an object with `items`',
    '(one per resource, in dependency order, then the ones deleted), `outputs`, `conditions` and `summary`.',
    'An item:',
    '',
    fieldTable(itemSchema(doc.components.schemas.Preview)),
    '',
    'A change (`changes` of an item or an output):',
    '',
    fieldTable(changeSchema(doc.components.schemas.Preview)),
    '',
    '## Routes',
    '',
    table(
      ['Method', 'Path', 'What it does'],
      ops.map(({ method, path, op }) => [method, `[${code(path)}](#${anchorOf(method, path)})`, op.summary + (op.security?.length === 0 ? ' (public)' : '')]),
    ),
    '',
  ]
  for (const { method, path, op } of ops) {
    out.push(`### ${method} ${path}`, '', `${cell(op.summary)}.`, '')
    out.push(op.security?.length === 0 ? 'Public: no credentials needed.' : 'Needs a token or a session.', '')
    const params = op.parameters ?? []
    const inPath = params.filter((p) => p.in === 'path').map((p) => code(p.name))
    const inQuery = params.filter((p) => p.in === 'query').map((p) => code(p.name))
    if (inPath.length) out.push(`Path parameters: ${inPath.join(', ')}${path.includes('{stack}') ? ' (a stack\'s id or name)' : ''}.`, '')
    if (inQuery.length) out.push(`Query parameters (all optional): ${inQuery.join(', ')}.`, '')
    const inHeader = params.filter((p) => p.in === 'header').map((p) => code(p.name))
    if (inHeader.length) out.push(`Headers (optional): ${inHeader.join(', ')}.`, '')
    if (op.description) out.push(cell(op.description), '')
    const schema = op.requestBody?.content['application/json'].schema
    if (schema) out.push(bodyTable(schema), '')
    const statuses = Object.keys(op.responses)
    out.push(`Responses: ${statuses.map((s) => (op.responses[s]!.$ref ? `${s} (error)` : `**${s}**`)).join(', ')}.`, '')
  }
  return out.join('\n')
}

const itemSchema = (preview: Schema) => ((preview.properties as Record<string, Schema>).items as Schema).items as Schema
const changeSchema = (preview: Schema) => ((itemSchema(preview).properties as Record<string, Schema>).changes as Schema).items as Schema

/** A JSON Schema object's fields: name, type, whether always there, and what it means. */
function fieldTable(schema: Schema): string {
  const required = new Set((schema.required as string[] | undefined) ?? [])
  const rows = Object.entries((schema.properties ?? {}) as Record<string, Schema>).map(([name, s]) => [code(name), s.const !== undefined ? code(JSON.stringify(s.const)) : typeText(s), required.has(name) ? 'always' : '', cell(String(s.description ?? ''))])
  return table(['Field', 'Type', 'Present', 'Meaning'], rows)
}
