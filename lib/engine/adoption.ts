/**
 * Adopted resources (a resource's `external_id`, Heat's key): what the engine
 * keeps in the row's data to tell an adopted row from one it manages, and a
 * fingerprint of the definition the row was adopted with, so that an update
 * that changes it is refused (Heat's rule: an external resource cannot be
 * updated) while one that leaves it alone is not.
 */
import { createHash } from 'node:crypto'

/** JSON with every map's keys sorted: the same value always gives the same text. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`
  if (typeof v === 'object' && v !== null) {
    const entries = Object.entries(v).filter(([, x]) => x !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(',')}}`
  }
  return JSON.stringify(v) ?? 'null'
}

/** A resource definition's type and properties (as written, functions of other resources included), hashed. */
export function definitionFingerprint(def: { type: string; properties: Record<string, unknown> }): string {
  return createHash('sha256').update(canonicalJson({ type: def.type, properties: def.properties })).digest('hex').slice(0, 32)
}

/** The keys of a row's data an adoption writes. */
export interface AdoptionData {
  /** The external_id the row adopted. */
  externalId?: string
  /** definitionFingerprint of the definition it was adopted with. */
  adoptedFrom?: string
}

export function adoptionOf(data: Record<string, unknown> | null): AdoptionData {
  return {
    ...(typeof data?.externalId === 'string' ? { externalId: data.externalId } : {}),
    ...(typeof data?.adoptedFrom === 'string' ? { adoptedFrom: data.adoptedFrom } : {}),
  }
}

/** The row's data once Kiln manages the object (external_id removed from the template). */
export function withoutAdoption(data: Record<string, unknown> | null): Record<string, unknown> {
  const { externalId: _e, adoptedFrom: _a, ...rest } = data ?? {}
  return rest
}

/**
 * Why an update must not touch an adopted (or managed) row, or null when it
 * may: external_id cannot be added to a managed resource or changed, and an
 * adopted resource cannot be updated while external_id is set.
 */
export function externalIdRefusal(name: string, row: AdoptionData, externalId: string, fingerprint: string): string | null {
  if (row.externalId === undefined) return `${name} is managed by Kiln: external_id cannot be added to it (as in Heat); remove the resource from the stack first, or give it another name`
  if (row.externalId !== externalId) return `external_id of ${name} cannot be changed (from ${row.externalId} to ${externalId}), as in Heat`
  if (row.adoptedFrom !== fingerprint) return `${name} was adopted with external_id ${externalId}: it cannot be updated (as in Heat); remove external_id to let Kiln manage and update it`
  return null
}
