/**
 * docs/reference/heat-api.md: Heat's Orchestration API v1 routes (the list of
 * heat/api/openstack/v1/__init__.py) against the routes Kiln's router really
 * registers (lib/api/heat-routes/). Whether a route is served comes from the
 * router, so the table cannot claim a route Kiln does not have; a route Kiln
 * serves that is not in Heat's list is listed separately. The notes are
 * written here and name what a served route honours or refuses.
 */
import { registeredRoutes } from '../../test/helpers/routes'
import { code, generatedHeader, table } from './markdown'

export const HEAT_SOURCES = ['lib/api/heat-routes/']

interface HeatRoute {
  method: string
  /** Heat's path under `/v1` */
  path: string
  /** what Kiln does with it, for served routes; why not, for the others (optional) */
  note?: string
}

const S = '/{tenant_id}/stacks/{stack_name}/{stack_id}'

/** Heat's v1 router, route by route (openstack/heat, heat/api/openstack/v1/__init__.py). */
const HEAT_ROUTES: HeatRoute[] = [
  { method: 'POST', path: '/{tenant_id}/validate', note: 'Answers with Heat\'s Description, Parameters and ParameterGroups; hidden defaults masked.' },
  { method: 'GET', path: '/{tenant_id}/resource_types', note: '`with_description` is honoured; the `support_status`, `name` and `version` filters are not.' },
  { method: 'GET', path: '/{tenant_id}/resource_types/{type_name}' },
  { method: 'GET', path: '/{tenant_id}/resource_types/{type_name}/template' },
  { method: 'GET', path: '/{tenant_id}/template_versions' },
  { method: 'GET', path: '/{tenant_id}/template_versions/{template_version}/functions' },
  { method: 'GET', path: '/{tenant_id}/stacks', note: '`status`, `name` (or `stack_name`), `limit` and `marker` are honoured; tag, sort and `show_*` filters are not.' },
  { method: 'POST', path: '/{tenant_id}/stacks', note: '`template_url` and nested templates in `files` are refused with a 400; `tags` are stored.' },
  { method: 'POST', path: '/{tenant_id}/stacks/preview', note: 'So `openstack stack create --dry-run` fails.' },
  { method: 'GET', path: '/{tenant_id}/stacks/detail' },
  { method: 'GET', path: '/{tenant_id}/stacks/{stack_name}', note: 'Redirects (302) to `/stacks/{name}/{id}`, as Heat does.' },
  { method: 'POST', path: '/{tenant_id}/stacks/{stack_name}' },
  { method: 'PUT', path: '/{tenant_id}/stacks/{stack_name}', note: 'Served directly (not redirected): an update by name or id.' },
  { method: 'PATCH', path: '/{tenant_id}/stacks/{stack_name}', note: 'Served directly: an update reusing the current template.' },
  { method: 'DELETE', path: '/{tenant_id}/stacks/{stack_name}', note: 'Served directly: some HTTP clients turn a redirected DELETE into a GET.' },
  { method: 'GET', path: '/{tenant_id}/stacks/{stack_name}/resources', note: 'Redirects.' },
  { method: 'GET', path: '/{tenant_id}/stacks/{stack_name}/events', note: 'Redirects.' },
  { method: 'GET', path: '/{tenant_id}/stacks/{stack_name}/template', note: 'Redirects.' },
  { method: 'GET', path: '/{tenant_id}/stacks/{stack_name}/environment' },
  { method: 'GET', path: '/{tenant_id}/stacks/{stack_name}/files' },
  { method: 'POST', path: '/{tenant_id}/stacks/{stack_name}/actions', note: 'Served directly, as the action route below.' },
  { method: 'GET', path: S, note: 'Heat\'s stack body: `stack_status` as `<ACTION>_<STATUS>`, parameters with the `OS::` pseudo-parameters, outputs.' },
  { method: 'GET', path: `${S}/template` },
  { method: 'GET', path: `${S}/environment`, note: 'So `openstack stack environment show` fails.' },
  { method: 'GET', path: `${S}/files` },
  { method: 'PUT', path: S, note: 'Accepted while the stack is IN_PROGRESS: the new update supersedes the running one (202). `converge` and `tags` are honoured; `clear_parameters` is refused (a PUT reuses no stored parameters).' },
  { method: 'PATCH', path: S, note: 'Reuses the current template when none is sent; given parameters override the stored ones. `converge`, `tags` and `clear_parameters` are honoured.' },
  { method: 'PUT', path: `${S}/preview`, note: 'Answers `added`, `updated`, `replaced`, `deleted`, `unchanged`.' },
  { method: 'PATCH', path: `${S}/preview`, note: 'So `openstack stack update --existing --dry-run` fails.' },
  { method: 'DELETE', path: S, note: 'Also while IN_PROGRESS: in-flight actions are aborted.' },
  { method: 'DELETE', path: `${S}/abandon` },
  { method: 'GET', path: `${S}/export` },
  { method: 'POST', path: `${S}/snapshots` },
  { method: 'GET', path: `${S}/snapshots` },
  { method: 'GET', path: `${S}/snapshots/{snapshot_id}` },
  { method: 'DELETE', path: `${S}/snapshots/{snapshot_id}` },
  { method: 'POST', path: `${S}/snapshots/{snapshot_id}/restore` },
  { method: 'GET', path: `${S}/outputs` },
  { method: 'GET', path: `${S}/outputs/{output_key}`, note: 'Names one output (`openstack stack output show`): a sensitive one (made from a secret) shows its value here, and `******` in the stack body.' },
  { method: 'GET', path: `${S}/resources`, note: 'One resource per name (the newest row); `nested_depth`, `with_detail` and filters are not honoured.' },
  { method: 'GET', path: `${S}/resources/{resource_name}` },
  { method: 'GET', path: `${S}/resources/{resource_name}/metadata` },
  { method: 'POST', path: `${S}/resources/{resource_name}/signal` },
  { method: 'PATCH', path: `${S}/resources/{resource_name}`, note: '`mark unhealthy`.' },
  { method: 'GET', path: `${S}/events`, note: 'Stack and resource state changes; `resource_status`, `sort_dir`, `marker` and `limit` are honoured.' },
  { method: 'GET', path: `${S}/resources/{resource_name}/events` },
  { method: 'GET', path: `${S}/resources/{resource_name}/events/{event_id}` },
  { method: 'POST', path: `${S}/actions`, note: '`cancel_update`, `cancel_without_rollback` and `check`; `suspend` and `resume` get a 400.' },
  { method: 'GET', path: '/{tenant_id}/build_info' },
  { method: 'GET', path: '/{tenant_id}/software_configs' },
  { method: 'POST', path: '/{tenant_id}/software_configs' },
  { method: 'GET', path: '/{tenant_id}/software_configs/{config_id}' },
  { method: 'DELETE', path: '/{tenant_id}/software_configs/{config_id}' },
  { method: 'GET', path: '/{tenant_id}/software_deployments' },
  { method: 'GET', path: '/{tenant_id}/software_deployments/metadata/{server_id}' },
  { method: 'POST', path: '/{tenant_id}/software_deployments' },
  { method: 'GET', path: '/{tenant_id}/software_deployments/{deployment_id}' },
  { method: 'PUT', path: '/{tenant_id}/software_deployments/{deployment_id}' },
  { method: 'DELETE', path: '/{tenant_id}/software_deployments/{deployment_id}' },
  { method: 'GET', path: '/{tenant_id}/services' },
]

/** Heat's parameter names as Kiln's router names them. */
const KILN_NAMES: Record<string, string> = { tenant_id: 'project', stack_name: 'name', stack_id: 'id', resource_name: 'resource', output_key: 'key', type_name: 'type' }
const kilnPath = (heatPath: string) => '/v1' + heatPath.replace(/\{(\w+)\}/g, (m, k: string) => (KILN_NAMES[k] ? `{${KILN_NAMES[k]}}` : m))
/** Kiln's path in Heat's parameter names, for the table. */
const heatNames = (path: string) => path.replace(/\{(\w+)\}/g, (m, k: string) => `{${Object.keys(KILN_NAMES).find((h) => KILN_NAMES[h] === k) ?? k}}`)

export function heatApiReference(): string {
  const served = new Set(registeredRoutes().filter((r) => r.path.startsWith('/v1/')).map((r) => `${r.method} ${r.path}`))
  const claimed = new Set<string>()
  const rows = HEAT_ROUTES.map((r) => {
    const key = `${r.method} ${kilnPath(r.path)}`
    const yes = served.has(key)
    if (yes) claimed.add(key)
    return [r.method, code('/v1' + r.path), yes ? 'yes' : 'no', r.note ?? '']
  })
  const extra = [...served].filter((k) => !claimed.has(k))
  const count = HEAT_ROUTES.length
  const out = [
    generatedHeader('Heat API compatibility', [...HEAT_SOURCES, 'scripts/docs/heat-api.ts (Heat\'s route list)']),
    'Kiln serves the part of Heat\'s Orchestration API v1 that Heat\'s own clients need to create, show, update',
    '(also while running), preview, cancel, check and delete stacks, under `/v1/{project_id}/...`, with Heat\'s',
    'field names, `<ACTION>_<STATUS>` strings, times without fractions, the name-to-id redirect, and Heat\'s',
    'error body (`{"code", "title", "explanation", "error": {"type", "message"}}`). Every route goes through the same',
    'service layer as Kiln\'s own API.',
    '',
    'Authentication is by token only (`X-Auth-Token`), as in Heat; `{project_id}` is the token\'s project id or name,',
    'and another project\'s path is answered with a 403. Debian\'s `python3-openstackclient` and `python3-heatclient`',
    'work unchanged with `--os-auth-type admin_token`: see the [walk-through](../../README.md#with-the-openstack-client).',
    'CI runs `openstack stack create --wait`, `update` (twice, the second while the first runs), `cancel --wait`,',
    '`show`, `output show`, `resource list`, `event list`, `list` and `delete --yes --wait` against Kiln',
    '(`test/api/heat.test.ts`).',
    '',
    `Of the ${count} methods and paths of Heat's router, Kiln serves ${rows.filter((r) => r[2] === 'yes').length}. "Served" is read from Kiln's router when this page is generated.`,
    '',
    table(['Method', 'Heat route', 'Served', 'Notes'], rows),
    '',
  ]
  if (extra.length) {
    out.push('Kiln also serves these, beyond Heat\'s list (redirects to the canonical `/stacks/{name}/{id}/...` form, and aliases by name):', '')
    for (const k of extra) {
      const [method, path] = k.split(' ')
      out.push(`- ${method} ${code(heatNames(path!))}`)
    }
    out.push('')
  }
  out.push(
    'What else Heat has and Kiln does not: nested stacks and template resources (a `resource_registry` entry that names a',
    'file is refused), `get_file`, stack snapshots, abandon and adopt, suspend and resume, and software deployments.',
    'A resource signal takes a wait condition handle\'s signals, and `{"unset_hook": …}` clears a hook a node waits at',
    '(`openstack stack hook poll` and `hook clear` work). Which template functions and resource types Kiln supports is in',
    '[hot-functions.md](hot-functions.md) and [resource-types.md](resource-types.md).',
    '',
  )
  return out.join('\n')
}
