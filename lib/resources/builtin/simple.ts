/** OS::Heat::None, OS::Heat::Value and OS::Heat::RandomString, as Heat defines them. */
import { randomInt } from 'node:crypto'
import { defineResourceType, ResourceActionError, type PropertySchema } from '../../sdk'
import { observeStored } from './util'

/** Stands in for any type (map a type to it in resource_registry): accepts any property, does nothing. */
export const noneResource = defineResourceType({
  name: 'OS::Heat::None',
  stateOnly: true,
  description: 'Does nothing; accepts any properties and returns null for any attribute.',
  properties: {},
  attributes: {},
  acceptsAnyProperties: true,
  acceptsAnyAttribute: true,
  async create(ctx) {
    return { physicalId: ctx.physicalName }
  },
  async update() {
    return {}
  },
  async delete() {},
  observe: observeStored,
})

const VALUE_TYPES = ['string', 'number', 'comma_delimited_list', 'json', 'boolean']

function convertValue(value: unknown, type: string | undefined): unknown {
  switch (type) {
    case 'number': {
      const n = typeof value === 'string' ? Number(value) : value
      if (typeof n !== 'number' || !Number.isFinite(n)) throw new ResourceActionError(`Value '${String(value)}' is not a number`)
      return n
    }
    case 'boolean':
      if (typeof value === 'boolean') return value
      if (typeof value === 'string' && ['true', 'false'].includes(value.toLowerCase())) return value.toLowerCase() === 'true'
      throw new ResourceActionError(`Value '${String(value)}' is not a boolean`)
    case 'comma_delimited_list':
      if (Array.isArray(value)) return value
      return typeof value === 'string' ? (value === '' ? [] : value.split(',').map((s) => s.trim())) : [value]
    case 'json':
      if (typeof value === 'string') {
        try {
          return JSON.parse(value)
        } catch {
          throw new ResourceActionError(`Value is not valid JSON`)
        }
      }
      return value
    case 'string':
      return typeof value === 'string' ? value : JSON.stringify(value)
    default:
      return value
  }
}

export const valueResource = defineResourceType({
  name: 'OS::Heat::Value',
  stateOnly: true,
  description: 'Holds a value (optionally converted to a parameter type) for other resources and outputs to use.',
  properties: {
    value: { type: 'any', required: true, updateAllowed: true, description: 'The expression to hold.' },
    type: { type: 'string', updateAllowed: true, constraints: [{ allowed_values: VALUE_TYPES }], description: 'The type to convert the value to.' },
  },
  attributes: { value: { description: 'The value, converted to `type` when given.', derivedFrom: ['value', 'type'] } },
  async create(ctx, props) {
    return { physicalId: ctx.physicalName, attributes: { value: convertValue(props.value, props.type as string | undefined) } }
  },
  async update(_ctx, props) {
    return { attributes: { value: convertValue(props.value, props.type as string | undefined) } }
  },
  async delete() {},
  observe: observeStored,
})

const SEQUENCES: Record<string, string> = {
  lettersdigits: 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789',
  letters: 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz',
  lowercase: 'abcdefghijklmnopqrstuvwxyz',
  uppercase: 'ABCDEFGHIJKLMNOPQRSTUVWXYZ',
  digits: '0123456789',
  hexdigits: '0123456789abcdefABCDEF',
  octdigits: '01234567',
}

const classSchema: PropertySchema = {
  type: 'map',
  schema: {
    class: { type: 'string', default: 'lettersdigits', constraints: [{ allowed_values: Object.keys(SEQUENCES) }] },
    min: { type: 'integer', default: 1, constraints: [{ range: { min: 1, max: 512 } }] },
  },
}
const sequenceSchema: PropertySchema = {
  type: 'map',
  schema: {
    sequence: { type: 'string', required: true, constraints: [{ length: { min: 1 } }] },
    min: { type: 'integer', default: 1, constraints: [{ range: { min: 1, max: 512 } }] },
  },
}

/** Heat's algorithm: first the minimum of each class/sequence, then fill from all of them, then shuffle. */
export function randomString(props: Record<string, unknown>): string {
  const length = Number(props.length ?? 32)
  let classes = (props.character_classes as { class: string; min: number }[] | undefined) ?? []
  const sequences = (props.character_sequences as { sequence: string; min: number }[] | undefined) ?? []
  if (typeof props.sequence === 'string') classes = [{ class: props.sequence, min: 1 }]
  if (!classes.length && !sequences.length) classes = [{ class: 'lettersdigits', min: 1 }]
  const pools = [...classes.map((c) => ({ chars: SEQUENCES[c.class]!, min: c.min })), ...sequences.map((s) => ({ chars: s.sequence, min: s.min }))]
  const minimum = pools.reduce((n, p) => n + p.min, 0)
  if (minimum > length) throw new ResourceActionError(`Length property cannot be smaller than combined character class and character sequence minimums (${minimum} > ${length})`)
  const pick = (s: string) => s[randomInt(s.length)]!
  const out: string[] = []
  for (const p of pools) for (let i = 0; i < p.min; i++) out.push(pick(p.chars))
  const all = [...new Set(pools.map((p) => p.chars).join(''))].join('')
  while (out.length < length) out.push(pick(all))
  for (let i = out.length - 1; i > 0; i--) {
    const j = randomInt(i + 1)
    ;[out[i], out[j]] = [out[j]!, out[i]!]
  }
  return out.join('')
}

export const randomStringResource = defineResourceType({
  name: 'OS::Heat::RandomString',
  stateOnly: true,
  description: 'A random string, generated once at create; any property change generates a new one (replacement).',
  properties: {
    length: { type: 'integer', default: 32, constraints: [{ range: { min: 1, max: 512 } }], description: 'Length of the string.' },
    sequence: { type: 'string', constraints: [{ allowed_values: Object.keys(SEQUENCES) }], description: 'Deprecated: use character_classes.' },
    character_classes: { type: 'list', items: classSchema, description: 'Character classes and their minimum counts.' },
    character_sequences: { type: 'list', items: sequenceSchema, description: 'Character sequences and their minimum counts.' },
    salt: { type: 'string', description: 'Change it to generate a new string (causes a replacement).' },
  },
  attributes: { value: { description: 'The random string.', type: 'string' } },
  async create(_ctx, props) {
    const value = randomString(props)
    // get_resource on a RandomString gives the string itself, as in Heat.
    return { physicalId: value, attributes: { value } }
  },
  async update() {
    return {}
  },
  async delete() {},
  observe: observeStored,
})
