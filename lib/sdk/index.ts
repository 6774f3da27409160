/**
 * The resource type SDK: what the built-in types and type packages are
 * written against. A type is a plain object (lib/resources/types.ts has the
 * whole contract: actions, observe, adopt, the rules for objects outside
 * Kiln); `defineResourceType` checks its shape once, where it is defined,
 * so that a mistake is an error naming the type and the place when the
 * package loads, not a failed resource later.
 *
 * A type package (an npm package or a directory named in KILN_TYPE_PACKAGES)
 * exports, as its default, either a list of types or a function that is
 * given this SDK and returns them:
 *
 *   export default (kiln) => [kiln.defineResourceType({ name: 'Acme::Widget', … })]
 *
 * so it needs no import of Kiln's code at run time (`import type` for the
 * TypeScript types is erased).
 */
import { ReplaceRequired, ResourceActionError, type Observation, type PropertySchema, type ResourceContext, type ResourceState, type ResourceType } from '../resources/types'

export type {
  ActionResult,
  AdoptOutcome,
  Adopted,
  AttributeSchema,
  ClaimOutcome,
  Observation,
  ObservedObject,
  OutsideObjects,
  OutsideRecord,
  OutsideRef,
  ParkWait,
  PropertyConstraint,
  PropertySchema,
  PropertyType,
  ResourceContext,
  ResourceSignal,
  ResourceSignals,
  ResourceState,
  ResourceType,
  ResourceTypeConfig,
  ResumedPark,
  SignalDetails,
  SignalWaitOutcome,
} from '../resources/types'
export { ReplaceRequired, ResourceActionError }

/** A type that is not what the engine can run: names the type and the place. */
export class TypeDefinitionError extends Error {
  override name = 'TypeDefinitionError'
}

const TYPE_NAME = /^[A-Z][A-Za-z0-9]*(?:::[A-Z][A-Za-z0-9]*)+$/
const KEY = /^[A-Za-z_][A-Za-z0-9_]*$/
const PROPERTY_TYPES = ['string', 'integer', 'number', 'boolean', 'map', 'list', 'any']
const ACTIONS = ['create', 'update', 'delete'] as const
const OPTIONAL = ['check', 'observe', 'adopt', 'adoptMany', 'snapshot', 'deleteSnapshot', 'replaceOnUpdate', 'needsReplaceFailed', 'signal'] as const

function checkSchema(type: string, where: string, s: PropertySchema): void {
  const bad = (what: string) => new TypeDefinitionError(`${type}: ${where}: ${what}`)
  if (!s || typeof s !== 'object') throw bad('a property schema is an object')
  if (!PROPERTY_TYPES.includes(s.type)) throw bad(`type must be one of ${PROPERTY_TYPES.join(', ')}`)
  for (const [k, sub] of Object.entries(s.schema ?? {})) checkSchema(type, `${where}.${k}`, sub)
  if (s.items) checkSchema(type, `${where}[]`, s.items)
}

/** Check `t` and return it: a type the engine can run. */
export function defineResourceType(t: ResourceType): ResourceType {
  const name = typeof t?.name === 'string' ? t.name : '(a type without a name)'
  const bad = (what: string) => new TypeDefinitionError(`${name}: ${what}`)
  if (!TYPE_NAME.test(name)) throw bad('the name is words of letters and digits, each starting with a capital, joined by :: (at least two: Acme::Widget)')
  if (typeof t.description !== 'string') throw bad('description: a sentence saying what the type makes')
  for (const a of ACTIONS) if (typeof t[a] !== 'function') throw bad(`${a}: an async function`)
  for (const a of OPTIONAL) if (t[a] !== undefined && typeof t[a] !== 'function') throw bad(`${a}: a function, when given`)
  for (const [k, s] of Object.entries(t.properties ?? {})) {
    if (!KEY.test(k)) throw bad(`properties.${k}: a property name is letters, digits and _`)
    checkSchema(name, `properties.${k}`, s)
  }
  for (const [k, a] of Object.entries(t.attributes ?? {})) {
    if (!KEY.test(k)) throw bad(`attributes.${k}: an attribute name is letters, digits and _`)
    if (typeof a?.description !== 'string') throw bad(`attributes.${k}.description: a sentence`)
    for (const p of a.derivedFrom ?? []) if (!(p in (t.properties ?? {}))) throw bad(`attributes.${k}.derivedFrom: ${p} is not a property`)
  }
  if (t.snapshot && !t.deleteSnapshot) throw bad('snapshot: a type that takes snapshots deletes them too (deleteSnapshot)')
  return { ...t, properties: t.properties ?? {}, attributes: t.attributes ?? {} }
}

/**
 * `observe` of a type with nothing outside Kiln: what the engine stored is
 * what there is. It is never gone and never drifted.
 */
export async function observeStored(ctx: ResourceContext, state: ResourceState): Promise<Observation> {
  ctx.signal.throwIfAborted()
  return { state: 'exists', properties: state.properties, attributes: state.attributes }
}

/** What a type package's default export is given. */
export const sdk = { defineResourceType, observeStored, ReplaceRequired, ResourceActionError, TypeDefinitionError }
export type KilnSdk = typeof sdk
