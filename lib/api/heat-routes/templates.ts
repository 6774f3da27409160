/** Heat's template validation, resource types, and a stack's template. */
import { describeType, mayUse } from '../../resources/registry'
import type { Principal } from '../../services/accounts'
import { MASK } from '../../services/reads'
import { actorOf, type ApiDeps } from '../deps'
import { HttpError, json, type Router } from '../http'
import { validateLeniently } from '../validate'
import { body, fail, identified, requireProject } from './common'
import { submission } from './requests'

const HEAT_TYPES: Record<string, string> = { string: 'String', number: 'Number', boolean: 'Boolean', json: 'Json', comma_delimited_list: 'CommaDelimitedList' }

export function templateRoutes(d: ApiDeps, router: Router<Principal>): void {
  router
    .add('POST', '/v1/:project/validate', async (c) => {
      requireProject(c)
      const b = await body(c)
      const checked = await validateLeniently(d, { template: submission(b).template ?? fail('template is required'), ...(b.environment ? { environment: b.environment as Record<string, unknown> } : {}), ...(b.parameters ? { parameters: b.parameters as Record<string, unknown> } : {}) })
      const t = checked.summary
      return json({
        Description: t.description ?? 'No description',
        Parameters: Object.fromEntries(
          t.parameters.map((p) => [
            p.name,
            { Type: HEAT_TYPES[p.type], Description: p.description ?? '', Label: p.label ?? p.name, NoEcho: p.hidden ? 'true' : 'false', ...(p.default !== undefined ? { Default: p.hidden ? MASK : p.default } : {}) },
          ]),
        ),
        ...(t.parameterGroups.length ? { ParameterGroups: t.parameterGroups } : {}),
      })
    })
    .add('GET', '/v1/:project/resource_types', (c) => {
      requireProject(c)
      const withDescription = c.url.searchParams.get('with_description') === 'true'
      const types = d.registry.list().filter((t) => mayUse(t, c.principal))
      return json({ resource_types: withDescription ? types.map((t) => ({ resource_type: t.name, description: t.description })) : types.map((t) => t.name) })
    })
    .add('GET', '/v1/:project/resource_types/:type', (c) => {
      requireProject(c)
      const t = d.registry.get(c.params.type!)
      if (!t || !mayUse(t, c.principal)) throw new HttpError(404, 'not_found', `The Resource Type (${c.params.type}) could not be found.`)
      return json(describeType(t))
    })
    .add('GET', '/v1/:project/stacks/:name/:id/template', async (c) => {
      const s = await identified(d, c)
      return json((await d.reads.template(actorOf(c.principal), String(s.id))).template)
    })
}
