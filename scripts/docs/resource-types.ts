/**
 * docs/reference/resource-types.md from the built-in types' own schemas
 * (lib/resources/registry.ts, builtinTypes): every property with its type,
 * default, constraints and whether a change updates in place or replaces, and
 * every attribute. How the types behave is in docs/guide/resource-types.md.
 */
import { builtinTypes } from '../../lib/resources/registry'
import type { PropertyConstraint, PropertySchema, ResourceType } from '../../lib/resources/types'
import { code, generatedHeader, literal, table } from './markdown'

export const TYPES_SOURCES = ['lib/resources/registry.ts', 'lib/resources/builtin/']

function constraintText(c: PropertyConstraint): string {
  let rule: string
  if ('length' in c) rule = `length ${range(c.length)}`
  else if ('range' in c) rule = `value ${range(c.range)}`
  else if ('allowed_values' in c) rule = `one of ${c.allowed_values.map((v) => code(typeof v === 'string' ? v : JSON.stringify(v))).join(', ')}`
  else if ('bytes' in c) rule = `at most ${c.bytes.max} bytes (UTF-8)`
  else if ('program' in c) return c.description ?? 'the program must be one this server allows'
  else rule = `matches ${code(c.allowed_pattern)}`
  return c.description && !('allowed_values' in c) ? `${c.description} (${rule})` : rule
}

const range = (r: { min?: number; max?: number }) =>
  r.min !== undefined && r.max !== undefined ? `${r.min}–${r.max}` : r.min !== undefined ? `at least ${r.min}` : `at most ${r.max}`

/** A property and its nested keys (`action_wait_secs.create`, `character_classes[].min`) as rows. */
function propertyRows(name: string, s: PropertySchema, parentUpdatable: boolean | null): string[][] {
  // A nested key is updated in place when its top-level property is: changes are compared per top-level property.
  const updatable = parentUpdatable ?? s.updateAllowed === true
  const type = s.type === 'list' && s.items ? `list of ${s.items.type}` : s.type
  const rules = [...(s.constraints ?? []).map(constraintText), ...(s.secret ? ['secret: never shown'] : [])]
  const meaning = [(s.description ?? '').replace(/\.$/, ''), ...rules].filter(Boolean).join('; ')
  const rows = [[code(name), type, s.required ? 'yes' : '', literal(s.default), parentUpdatable === null ? (updatable ? 'in place' : 'replace') : '', meaning]]
  for (const [k, sub] of Object.entries(s.schema ?? {})) rows.push(...propertyRows(`${name}.${k}`, sub, updatable))
  for (const [k, sub] of Object.entries(s.items?.schema ?? {})) rows.push(...propertyRows(`${name}[].${k}`, sub, updatable))
  return rows
}

/** When an attribute is masked: always, or when what it is made from holds a secret (lib/resources/secrets.ts). */
function attributeSecrecy(a: ResourceType['attributes'][string]): string {
  if (a.secret) return ' Secret: masked in every response.'
  if (!a.derivedFrom) return ' Secret when any property holds a secret.'
  if (!a.derivedFrom.length) return ''
  return ` Secret when ${a.derivedFrom.map(code).join(' or ')} holds a secret.`
}

function typeSection(t: ResourceType): string {
  const out = [`## ${t.name}`, '', t.description, '']
  out.push(
    t.stateOnly
      ? 'State-only: its actions change nothing outside Kiln\'s database, so its steps commit without waiting for the disk ([durability](../design/durability.md)).'
      : 'Acts on something outside Kiln\'s database: its steps wait for the disk, and a create first stores the properties it is about to use.',
    '',
  )
  const props = Object.entries(t.properties)
  if (t.acceptsAnyProperties) out.push('Accepts any property (none is checked), and every change is made in place.', '')
  if (props.length) {
    out.push(
      'Properties ("on change": whether changing the property updates the resource in place or replaces it):',
      '',
      table(['Property', 'Type', 'Required', 'Default', 'On change', 'Meaning'], props.flatMap(([k, s]) => propertyRows(k, s, null))),
      '',
    )
  }
  const attrs = Object.entries(t.attributes)
  if (t.acceptsAnyAttribute) out.push('Any attribute name resolves (to null).', '')
  if (attrs.length) out.push('Attributes (`get_attr`):', '', table(['Attribute', 'Type', 'Meaning'], attrs.map(([k, a]) => [code(k), a.type ?? 'any', a.description + attributeSecrecy(a)])), '')
  return out.join('\n')
}

export function resourceTypesReference(): string {
  const types = [...builtinTypes()].sort((a, b) => a.name.localeCompare(b.name))
  return [
    generatedHeader('Resource types', TYPES_SOURCES),
    'The types every Kiln installation has. How they behave, and how to add one, is in the',
    '[resource types guide](../guide/resource-types.md). `GET /api/resource-types/{type}` answers the same schema as JSON.',
    '',
    'An attribute made from a property that holds a secret (a hidden parameter\'s value, or text made from one) is',
    'secret too, whatever its value looks like (a digest or a length of a secret gives it away): it is masked wherever',
    'secrets are, and an output that reads it is sensitive ([security](../operations/security.md#what-a-project-can-and-cannot-reach-through-kiln)).',
    '',
    table(['Type', 'What it is'], types.map((t) => [`[${code(t.name)}](#${t.name.toLowerCase().replace(/[^a-z0-9_ -]/g, '')})`, t.description])),
    '',
    ...types.map(typeSection),
  ].join('\n')
}
