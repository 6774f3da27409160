/** Resource types, and template validation for the editor. */
import { describeType, mayUse } from '../../resources/registry'
import type { Principal } from '../../services/accounts'
import type { ApiDeps } from '../deps'
import { HttpError, json, parse, type Router } from '../http'
import { ValidateBody } from '../schemas'
import { validateLeniently } from '../validate'

export function templateRoutes(d: ApiDeps, router: Router<Principal>): void {
  router
    .add('GET', '/api/resource-types', (c) => json({ resourceTypes: d.registry.list().filter((t) => mayUse(t, c.principal)).map((t) => ({ name: t.name, description: t.description })) }))
    .add('GET', '/api/resource-types/:type', (c) => {
      const t = d.registry.get(c.params.type!)
      if (!t || !mayUse(t, c.principal)) throw new HttpError(404, 'not_found', `resource type ${c.params.type} not found`)
      return json(describeType(t))
    })
    .add('POST', '/api/templates/validate', async (c) => {
      const b = parse(ValidateBody, await c.json())
      const checked = await validateLeniently(d, b)
      const t = checked.summary
      return json({
        valid: true,
        version: t.version,
        description: t.description ?? '',
        parameters: t.parameters.map((p) => ({ name: p.name, type: p.type, label: p.label ?? null, description: p.description ?? '', default: p.hidden ? undefined : p.default, hidden: p.hidden, constraints: p.constraints })),
        parameterGroups: t.parameterGroups,
        resources: checked.plan.names.map((name) => ({ name, type: checked.plan.types[name], dependsOn: checked.plan.dependsOn[name] })),
        outputs: t.outputs,
      })
    })
}
