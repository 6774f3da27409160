/**
 * The set of resource types a process knows, and the views other modules
 * need of it: the template module's TypeCatalog (validation at submit time)
 * and a Heat-style schema description for the API.
 */
import { delayResource } from './builtin/delay'
import type { TypeCatalog } from '../template/types'
import { execResource, type ExecSettings } from './builtin/exec'
import { fileResource } from './builtin/file'
import { postgresDatabaseResource } from './builtin/postgres-database'
import { noneResource, randomStringResource, valueResource } from './builtin/simple'
import { testResource } from './builtin/test-resource'
import { waitConditionHandleResource, waitConditionResource } from './builtin/wait-condition'
import { catalogData, catalogFromData } from './catalog'
import type { PropertySchema, ResourceType } from './types'

export interface Registry {
  get(name: string): ResourceType | undefined
  has(name: string): boolean
  list(): ResourceType[]
}

export interface BuiltinOptions {
  /** Kiln::Exec's allow-list (KILN_EXEC_COMMANDS); empty or unset: the type refuses every command. */
  exec?: ExecSettings
}

export function builtinTypes(opts: BuiltinOptions = {}): ResourceType[] {
  return [
    testResource,
    noneResource,
    valueResource,
    randomStringResource,
    waitConditionHandleResource,
    waitConditionResource,
    delayResource,
    fileResource,
    postgresDatabaseResource,
    execResource(opts.exec ?? { commands: [] }),
  ]
}

export function createRegistry(types: ResourceType[]): Registry {
  const byName = new Map<string, ResourceType>()
  for (const t of types) {
    if (byName.has(t.name)) throw new Error(`resource type ${t.name} is registered twice`)
    byName.set(t.name, t)
  }
  return {
    get: (name) => byName.get(name),
    has: (name) => byName.has(name),
    list: () => [...byName.values()].sort((a, b) => a.name.localeCompare(b.name)),
  }
}

/** Names of the types whose actions change nothing outside Kiln's database (ResourceType.stateOnly). */
export function stateOnlyTypeNames(registry: Pick<Registry, 'list'>): string[] {
  return registry.list().filter((t) => t.stateOnly).map((t) => t.name)
}

export function typeCatalog(registry: Registry): TypeCatalog {
  return catalogFromData(catalogData(registry.list()))
}

/** Heat's resource_schema shape (GET /resource_types/{type}). */
export function describeType(t: ResourceType) {
  const prop = (s: PropertySchema): Record<string, unknown> => ({
    type: s.type,
    description: s.description ?? '',
    required: s.required === true,
    update_allowed: s.updateAllowed === true,
    immutable: false,
    ...(s.default !== undefined ? { default: s.default } : {}),
    ...(s.constraints?.length ? { constraints: s.constraints } : {}),
    ...(s.schema ? { schema: Object.fromEntries(Object.entries(s.schema).map(([k, v]) => [k, prop(v)])) } : {}),
    ...(s.items ? { schema: { '*': prop(s.items) } } : {}),
  })
  return {
    resource_type: t.name,
    description: t.description,
    properties: Object.fromEntries(Object.entries(t.properties).map(([k, v]) => [k, prop(v)])),
    attributes: Object.fromEntries(Object.entries(t.attributes).map(([k, v]) => [k, { description: v.description, ...(v.type ? { type: v.type } : {}) }])),
    support_status: { status: 'SUPPORTED', version: null, message: null, previous_status: null },
  }
}
