/**
 * The fake resource type of Heat's convergence scenario tests
 * (heat/tests/convergence/framework/fake_resource.py): string properties
 * a, b, c, ca, !a, !b; attributes a and !a read back the stored values; a
 * change to a property whose name contains "!" forces a replacement.
 * No defaults, so the stored properties are exactly the ones a definition gives
 * (what `verify` counts).
 */
import type { PropertySchema, ResourceType } from '../../lib/resources/types'

export const SCENARIO_TYPE = 'Kiln::Test::Scenario'

const prop = (name: string): PropertySchema => ({ type: 'string', updateAllowed: !name.includes('!'), description: `scenario property ${name}` })

export function scenarioType(): ResourceType {
  const names = ['a', 'b', 'c', 'ca', '!a', '!b']
  return {
    name: SCENARIO_TYPE,
    description: "Heat's convergence-scenario fake resource",
    properties: Object.fromEntries(names.map((n) => [n, prop(n)])),
    attributes: { a: { description: 'value of property a' }, '!a': { description: 'value of property !a' } },
    async create(ctx, props) {
      return { physicalId: ctx.physicalName, attributes: { a: props.a ?? null, '!a': props['!a'] ?? null } }
    },
    async update(_ctx, props) {
      return { attributes: { a: props.a ?? null, '!a': props['!a'] ?? null } }
    },
    async delete() {},
  }
}
