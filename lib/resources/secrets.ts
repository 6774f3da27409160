/**
 * What a resource type declares `secret` (attributes such as a database
 * login's `password` or a wait condition handle's `token`, properties), and
 * the textual forms of those values on a row: engine and reads mask them
 * wherever else the same values show.
 *
 * An attribute is also secret when it is made from a property that holds a
 * secret (a file's `sha256` of content made from a hidden parameter): a type
 * computes its attributes from its properties in ways the template's secrecy
 * tracking cannot follow, so every attribute made from a secret property is
 * taken for secret. Its forms are stored with the row's (resource.secret_forms),
 * so that everything that masks by those (reads, events, the Heat API, outputs
 * made sensitive) masks the attribute too.
 */
import { addForms, holdsSecret, secretList, storedForms } from '../template'
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

/**
 * The forms of a row's attributes made from its secret properties: every attribute whose properties
 * (its schema's `derivedFrom`, or all of them) hold one of `forms` (the forms the properties carry,
 * as stored).
 */
export function attributeSecretForms(type: ResourceType | undefined, row: { properties?: Record<string, unknown> | null; attributes?: Record<string, unknown> | null }, forms: readonly string[]): string[] {
  if (!forms.length || !row.attributes) return []
  const secrets = secretList(forms)
  const out = new Set<string>()
  for (const [k, v] of Object.entries(row.attributes)) {
    const from = type?.attributes[k]?.derivedFrom
    if (!from || from.some((p) => holdsSecret(row.properties?.[p], secrets))) addForms(v, false, out)
  }
  return [...out]
}

/** `forms` (as a row stores them) and the forms of the row's attributes made from them. */
export function withAttributeForms(type: ResourceType | undefined, row: { properties?: Record<string, unknown> | null; attributes?: Record<string, unknown> | null }, forms: string[]): string[] {
  const more = attributeSecretForms(type, row, forms)
  return more.length ? storedForms([...forms, ...more]) : forms
}
