/**
 * The template module's view of the resource types (TypeCatalog), built from
 * plain data, so that an evaluation thread, which loads no resource type
 * (their code opens files and databases), validates properties exactly as
 * the process that sent the work would.
 */
import type { CatalogData, TypeCatalog } from '../template/types'
import { UNKNOWN } from '../template/types'
import { validateProperties } from './schema'
import type { PropertySchema, ResourceType } from './types'

function containsUnknown(v: unknown): boolean {
  if (v === UNKNOWN) return true
  if (Array.isArray(v)) return v.some(containsUnknown)
  if (typeof v === 'object' && v !== null) return Object.values(v).some(containsUnknown)
  return false
}

export function catalogData(types: ResourceType[]): CatalogData {
  return Object.fromEntries(
    types.map((t) => [
      t.name,
      {
        properties: t.properties as Record<string, unknown>,
        attributes: t.acceptsAnyAttribute ? null : Object.keys(t.attributes),
        acceptsAnyProperties: t.acceptsAnyProperties === true,
        adopts: t.adopt !== undefined,
        snapshots: t.snapshot !== undefined,
        ...(t.ownerProject ? { owner: t.ownerProject } : {}),
        ...(t.replaceOnEveryUpdate ? { replaceOnEveryUpdate: true } : {}),
      },
    ]),
  )
}

/**
 * The catalog of `data`; with `projectId`, as that project sees it: a type
 * another project's provider brings is unknown to it.
 */
export function catalogFromData(data: CatalogData, projectId?: string): TypeCatalog {
  const get = (name: string) => {
    const t = Object.hasOwn(data, name) ? data[name] : undefined
    return t && (t.owner === undefined || projectId === undefined || t.owner === projectId) ? t : undefined
  }
  return {
    data,
    has: (name) => get(name) !== undefined,
    validateProperties(name, properties) {
      const t = get(name)
      if (!t) return [{ path: '', message: `unknown resource type ${name}` }]
      return validateProperties(t.properties as Record<string, PropertySchema>, properties, { skip: containsUnknown, acceptUnknown: t.acceptsAnyProperties }).issues
    },
    attributes: (name) => get(name)?.attributes ?? undefined,
    adopts: (name) => get(name)?.adopts === true,
    snapshots: (name) => get(name)?.snapshots === true,
  }
}

/** What a preview needs of a type: its property schemas. */
export function schemasFromData(data: CatalogData): { get(name: string): { properties: Record<string, PropertySchema>; acceptsAnyProperties: boolean } | undefined } {
  return { get: (name) => (Object.hasOwn(data, name) ? { properties: data[name]!.properties as Record<string, PropertySchema>, acceptsAnyProperties: data[name]!.acceptsAnyProperties } : undefined) }
}
