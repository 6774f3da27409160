/**
 * The OpenAPI 3.1 document of Kiln's REST API, served at /api/openapi.json.
 * Request bodies come from the same zod schemas the handlers validate with,
 * so the document cannot drift from the code.
 */
import { z } from 'zod'
import { PreviewResultSchema } from '../plan/preview-types'
import * as s from './schemas'

interface Op {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete'
  path: string
  summary: string
  body?: z.ZodType
  ok: number
  query?: string[]
  /** Request headers the operation reads. */
  headers?: string[]
  public?: boolean
  /** Further documented answers: 409 (a stale edit or plan), 410 (an expired plan). */
  also?: number[]
  /** The success body, when it is a documented schema. */
  returns?: string
  description?: string
}

const EXPECT = 'Send the version the edit was written against, `expect` (a traversal or template id) or `If-Match` with the ETag of GET /api/stacks/{stack}: if the stack moved to another template since (another update, a rollback), the answer is 409 with `expected`, `current`, `since` (the operations started since) and `diff` (templates as a unified diff, parameters one by one, hidden values masked), and nothing starts. To supersede a running update knowingly, name its version. An unchanged submission answers 200 with `noChanges: true` and starts nothing, unless `force: true`.'

let cached: Record<string, unknown> | null = null

export function openApiDocument(): Record<string, unknown> {
  if (cached) return cached
  const ops: Op[] = [
    { method: 'get', path: '/api/health', summary: 'Up (200) or down (503); nothing more', ok: 200, public: true },
    { method: 'get', path: '/api/health/details', summary: 'Database, migrations and live workers (admin tokens only)', ok: 200 },
    { method: 'get', path: '/api/openapi.json', summary: 'This document', ok: 200, public: true },
    { method: 'post', path: '/api/session', summary: 'Log in with a token: sets the session cookie, returns the CSRF token', body: s.LoginBody, ok: 200, public: true },
    { method: 'get', path: '/api/session', summary: 'Who am I (and the CSRF token of a browser session)', ok: 200 },
    { method: 'delete', path: '/api/session', summary: 'Log out', ok: 204 },
    { method: 'get', path: '/api/tokens', summary: "The project's API tokens (never their secrets)", ok: 200 },
    { method: 'post', path: '/api/tokens', summary: 'Create a token; its secret is shown once', body: s.TokenBody, ok: 201 },
    { method: 'delete', path: '/api/tokens/{token}', summary: 'Revoke a token (and end its sessions)', ok: 204 },
    { method: 'post', path: '/api/projects', summary: 'Create a project and its first token (admin tokens only)', body: s.ProjectBody, ok: 201 },
    { method: 'get', path: '/api/resource-types', summary: "Resource types this project may use: the built-in ones and its providers' (and the admin's)", ok: 200 },
    { method: 'get', path: '/api/providers', summary: "The resource providers this project may use: its own and the admin's (never their secrets)", ok: 200 },
    {
      method: 'post', path: '/api/providers', summary: 'Register an HTTP resource provider: Kiln reads its types (GET <url>/types, signed) and names them <prefix>::<type>', body: s.ProviderBody, ok: 201, also: [409],
      description: 'Registering again under the same name replaces the URL, secret and types. Without `secret`, one is generated and answered once. `scope: global` (admin tokens only) makes it every project’s. 400 when the provider cannot be reached or its types break the protocol (the reason names the place); 409 when another provider has the prefix.',
    },
    { method: 'post', path: '/api/providers/{provider}/refresh', summary: "Read the provider's types again (scope=global: the admin's)", query: ['scope'], ok: 200 },
    { method: 'delete', path: '/api/providers/{provider}', summary: 'Remove a provider (scope=global: the admin’s); 409 while resources of its types exist', query: ['scope'], ok: 204, also: [409] },
    { method: 'post', path: '/api/provider-callbacks/{stack}/{resource}', summary: "A provider's callback URL (signed, given in each request): wakes the resource's action waiting for a long operation, which then asks the provider again", query: ['sig'], ok: 202, public: true },
    { method: 'get', path: '/api/resource-types/{type}', summary: 'Property and attribute schema of a type', ok: 200 },
    { method: 'post', path: '/api/templates/validate', summary: 'Validate a template; errors name path, line and column', body: s.ValidateBody, ok: 200 },
    { method: 'get', path: '/api/stacks', summary: 'List stacks (filter by status or name; paginate with marker)', query: ['status', 'name', 'limit', 'marker'], ok: 200 },
    { method: 'post', path: '/api/stacks', summary: 'Create a stack', body: s.CreateBody, ok: 201 },
    { method: 'get', path: '/api/stacks/{stack}', summary: 'Show a stack (by id or name), with parameters (hidden ones masked) and outputs (sensitive ones masked; outputs=0: without them); the ETag header names its template version', query: ['outputs'], ok: 200 },
    { method: 'put', path: '/api/stacks/{stack}', summary: 'Update with a new template (also while IN_PROGRESS: supersedes the running traversal)', body: s.UpdateBody, headers: ['If-Match'], ok: 202, also: [409], description: EXPECT },
    { method: 'patch', path: '/api/stacks/{stack}', summary: 'Update reusing the current template; given parameters override', body: s.UpdateBody, headers: ['If-Match'], ok: 202, also: [409], description: EXPECT },
    { method: 'delete', path: '/api/stacks/{stack}', summary: 'Delete (also while IN_PROGRESS: in-flight actions are aborted)', ok: 202 },
    { method: 'post', path: '/api/stacks/{stack}/preview', summary: 'What an update would create, update, replace, delete, with property diffs, outputs and conditions (against the in-flight target)', body: s.PreviewBody, ok: 200, returns: 'Preview' },
    { method: 'post', path: '/api/stacks/{stack}/plans', summary: 'Compute a preview and save it as a plan (applies exactly this submission, or refuses)', body: s.PreviewBody, ok: 201 },
    { method: 'get', path: '/api/stacks/{stack}/plans', summary: "The stack's saved plans, newest first", ok: 200 },
    { method: 'get', path: '/api/stacks/{stack}/plans/{plan}', summary: 'A saved plan: its preview, what it was computed against, when it expires, whether it was applied', ok: 200 },
    { method: 'delete', path: '/api/stacks/{stack}/plans/{plan}', summary: 'Discard a saved plan', ok: 204 },
    {
      method: 'post', path: '/api/stacks/{stack}/plans/{plan}/apply', summary: 'Apply a saved plan: exactly its template, environment and parameters', ok: 202, also: [409, 410],
      description: "409 when the stack moved on since the plan was computed (another update or a rollback: `since`, `diff`; a resource row changed: `rows`); 410 when it expired (KILN_PLAN_TTL_MS); 409 when it was already applied. Nothing starts then.",
    },
    { method: 'get', path: '/api/plans/{plan}', summary: 'A saved plan by its id alone (with its stack)', ok: 200 },
    { method: 'post', path: '/api/stacks/{stack}/cancel', summary: 'Cancel the running operation, with or without rollback', body: s.CancelBody, ok: 202 },
    { method: 'post', path: '/api/stacks/{stack}/rollback', summary: 'Roll back to the last template that completed', ok: 202 },
    { method: 'post', path: '/api/stacks/{stack}/check', summary: 'Check every resource (each type observes its object: gone or drifted fails the check)', ok: 202 },
    { method: 'post', path: '/api/stacks/{stack}/resources/{resource}/signal', summary: "Signal a wait condition handle (a project token, or the handle's own token)", body: s.SignalBody, ok: 200 },
    {
      method: 'post', path: '/api/import/preview', summary: 'What an import would adopt: per external_id resource, the object as observed and how it differs from the template (nothing is written)', body: s.ImportBody, ok: 200, also: [413],
      description: 'A preview looks at most KILN_MAX_IMPORT_PREVIEW_ITEMS resources with external_id (more: 413, `limit: "import_preview_items"`), and a project may ask for KILN_IMPORT_PREVIEWS_PER_MINUTE previews a minute (more: 429 with Retry-After). An external_id that names nothing this project may adopt (nothing there, an object without a Kiln record, another project\'s) is refused with the same reason, whichever it is.',
    },
    { method: 'post', path: '/api/import', summary: 'Adopt existing objects (resources with external_id) into a new stack (201), or into the project’s stack of that name (202)', body: s.ImportBody, ok: 201 },
    { method: 'post', path: '/api/stacks/{stack}/drift', summary: 'Start a drift check: every resource observed against what was stored (a traversal; the rows are not changed)', ok: 202 },
    { method: 'get', path: '/api/stacks/{stack}/snapshots', summary: 'Snapshots its resources kept when deleted (deletion_policy: Snapshot), also of a deleted stack (by id); restore one with from_snapshot', ok: 200 },
    {
      method: 'delete', path: '/api/stacks/{stack}/snapshots/{snapshot}', summary: 'Delete a snapshot the stack kept (also of a deleted stack, by id): its copy and role are dropped on the server', ok: 204, also: [409],
      description: "It no longer counts against the project's quotas (KILN_PROJECT_MAX_SNAPSHOTS, KILN_PROJECT_DATABASE_QUOTA_BYTES). 404 for a snapshot the stack did not keep, or another project's; 409 while a database is being restored from it or it is being taken (nothing is deleted: try again once that is done).",
    },
    { method: 'get', path: '/api/snapshots', summary: "Every snapshot the project keeps, of its live and deleted stacks (name, the database it copies, stack, state, when taken)", ok: 200 },
    { method: 'get', path: '/api/stacks/{stack}/drift', summary: 'The latest drift check: per resource IN_SYNC, MODIFIED (with the changed properties), DELETED or NOT_CHECKED', ok: 200 },
    { method: 'get', path: '/api/stacks/{stack}/resources', summary: 'Resource rows with lock owner, lease and last traversal (all=1: deleted rows too)', query: ['all'], ok: 200 },
    { method: 'get', path: '/metrics', summary: 'Prometheus metrics of this web server and the database-wide gauges (admin tokens only)', ok: 200 },
    { method: 'post', path: '/api/stacks/{stack}/resources/{resource}/signal', summary: 'Signal an OS::Heat::WaitConditionHandle (a project token, or the handle’s own token), or clear the hook a resource waits at: {"unset_hook": "pre-create"} (a project token)', body: s.SignalBody, ok: 200 },
    { method: 'get', path: '/api/stacks/{stack}/workers', summary: 'hostname:pid of the workers named by the given ids (ids=a,b,…; at most 100), as the stack page shows lock holders', query: ['ids'], ok: 200 },
    { method: 'get', path: '/api/stacks/{stack}/resources/{resource}', summary: 'One resource row by id (deleted ones too)', ok: 200 },
    { method: 'get', path: '/api/stacks/{stack}/events', summary: 'Events after a sequence number (resume after any gap); `traversal` filters by a traversal id or `current` (the answer then names it as `traversalId`)', query: ['after', 'limit', 'resource', 'traversal'], ok: 200 },
    { method: 'get', path: '/api/stacks/{stack}/traversals', summary: 'Traversal history: action, who, outcome, superseded by', ok: 200 },
    { method: 'get', path: '/api/stacks/{stack}/traversals/{traversal}', summary: 'One traversal (id, or `current`: the running or latest one) with the resource type of every row', ok: 200 },
    { method: 'get', path: '/api/stacks/{stack}/traversals/{traversal}/graph', summary: 'A traversal graph (traversal id or `current`) as Cytoscape JSON, DOT or GraphML', query: ['format'], ok: 200 },
    { method: 'get', path: '/api/stacks/{stack}/template', summary: 'The current template, environment and parameters (hidden masked)', ok: 200 },
    { method: 'get', path: '/api/stacks/{stack}/traversals/{traversal}/template', summary: "A traversal's template version (traversal id or `current`): template text, environment and parameters (hidden masked)", ok: 200 },
    { method: 'get', path: '/api/stacks/{stack}/diff', summary: 'Diff of two versions (`from`, `to`: traversal or template ids, or `current`): templates and environments as unified diffs, parameters one by one', query: ['from', 'to'], ok: 200 },
    { method: 'get', path: '/api/stacks/{stack}/outputs', summary: 'Outputs resolved from the current resources; an output evaluated from a secret is masked and marked sensitive: true', ok: 200 },
    { method: 'get', path: '/api/stacks/{stack}/outputs/{key}', summary: 'One output; reveal=true shows a sensitive output’s value (the only place it is shown)', query: ['reveal'], ok: 200 },
  ]
  const paths: Record<string, Record<string, unknown>> = {}
  for (const op of ops) {
    const params = [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } }))
    for (const q of op.query ?? []) params.push({ name: q, in: 'query', required: false, schema: { type: 'string' } })
    for (const h of op.headers ?? []) params.push({ name: h, in: 'header', required: false, schema: { type: 'string' } })
    paths[op.path] ??= {}
    paths[op.path]![op.method] = {
      summary: op.summary,
      ...(op.description ? { description: op.description } : {}),
      ...(params.length ? { parameters: params } : {}),
      ...(op.body ? { requestBody: { required: true, content: { 'application/json': { schema: z.toJSONSchema(op.body, { io: 'input', unrepresentable: 'any' }) } } } } : {}),
      ...(op.public ? { security: [] } : {}),
      responses: {
        [String(op.ok)]: op.returns ? { description: 'success', content: { 'application/json': { schema: { $ref: `#/components/schemas/${op.returns}` } } } } : { description: 'success' },
        '400': { $ref: '#/components/responses/Error' },
        ...Object.fromEntries((op.also ?? []).map((code) => [String(code), { $ref: '#/components/responses/Error' }])),
        ...(op.public ? {} : { '401': { $ref: '#/components/responses/Error' }, '404': { $ref: '#/components/responses/Error' } }),
        // Too many failed token attempts from the client's address (the login form counts too); Retry-After says when to try again.
        ...(op.public && op.path !== '/api/session' ? {} : { '429': { $ref: '#/components/responses/Error' } }),
      },
    }
  }
  cached = {
    openapi: '3.1.0',
    info: { title: 'Kiln API', version: '1', description: "Kiln's REST API. Heat's Orchestration API v1 is also served under /v1/{project_id}." },
    servers: [{ url: '/' }],
    security: [{ token: [] }, { bearer: [] }, { session: [] }],
    components: {
      securitySchemes: {
        token: { type: 'apiKey', in: 'header', name: 'X-Auth-Token' },
        bearer: { type: 'http', scheme: 'bearer' },
        session: { type: 'apiKey', in: 'cookie', name: 'kiln_session', description: 'Browser session; state-changing requests also need the X-CSRF-Token header.' },
      },
      schemas: { Preview: z.toJSONSchema(PreviewResultSchema, { io: 'output', unrepresentable: 'any' }) },
      responses: {
        Error: {
          description: 'An error: `code`, `message`, and for template problems `issues` with path, line and column.',
          content: { 'application/json': { schema: { type: 'object', properties: { error: { type: 'object', properties: { code: { type: 'string' }, message: { type: 'string' }, issues: { type: 'array' } }, required: ['code', 'message'] } } } } },
        },
      },
    },
    paths,
  }
  return cached
}

