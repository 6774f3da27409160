/**
 * What a resource type declares `secret` (attributes such as a database
 * login's `password` or a wait condition handle's `token`, properties), and
 * the textual forms of those values on a row: engine and reads mask them
 * wherever else the same values show.
 */
import { addForms } from '../template'
import type { ResourceType } from './types'

export interface SecretNames {
  attributes: string[]
  properties: string[]
}

const NONE: SecretNames = { attributes: [], properties: [] }
const byType = new WeakMap<ResourceType, SecretNames>()

/** The attributes and properties a type declares `secret`. */
export function secretsOfType(type: ResourceType | undefined): SecretNames {
  if (!type) return NONE
  let names = byType.get(type)
  if (!names) {
    names = {
      attributes: Object.entries(type.attributes).filter(([, a]) => a.secret).map(([k]) => k),
      properties: Object.entries(type.properties).filter(([, p]) => p.secret).map(([k]) => k),
    }
    byType.set(type, names)
  }
  return names
}

/** Add the forms of a row's values its type declares secret to `into`. */
export function addSecretValues(type: ResourceType | undefined, values: { attributes?: Record<string, unknown> | null; properties?: Record<string, unknown> | null }, into: Set<string>): void {
  const names = secretsOfType(type)
  for (const k of names.attributes) if (values.attributes && Object.hasOwn(values.attributes, k)) addForms(values.attributes[k], false, into)
  for (const k of names.properties) if (values.properties && Object.hasOwn(values.properties, k)) addForms(values.properties[k], false, into)
}
