/**
 * Type packages (KILN_TYPE_PACKAGES): resource types written against the SDK
 * (lib/sdk) in npm packages or directories, loaded when a process starts.
 * The web server and every worker load the same list, so a template is
 * checked against the types that will run it.
 *
 * A package's default export is a list of types, or a function that is given
 * the SDK and returns them. Each is checked with defineResourceType; a
 * package that cannot be loaded, or a type that is not right, stops the
 * process at start with a message naming the package and the place.
 */
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { defineResourceType, sdk, TypeDefinitionError } from '../sdk'
import type { ResourceType } from './types'

/** Namespaces of Kiln's own types and Heat's: a package cannot shadow or imitate them. */
export const RESERVED_PREFIXES = ['OS', 'Kiln', 'AWS', 'Heat']

/** `spec`: a package name (resolved from the working directory), or a path starting with `.` or `/`. */
async function load(spec: string): Promise<unknown> {
  const target = spec.startsWith('.') || spec.startsWith('/') ? pathToFileURL(path.resolve(spec)).href : spec
  const mod = (await import(target)) as { default?: unknown; types?: unknown }
  const exported = mod.default ?? mod.types
  return typeof exported === 'function' ? await (exported as (s: typeof sdk) => unknown)(sdk) : exported
}

export async function loadTypePackages(specs: readonly string[]): Promise<ResourceType[]> {
  const out: ResourceType[] = []
  for (const spec of specs) {
    let exported: unknown
    try {
      exported = await load(spec)
    } catch (err) {
      throw new TypeDefinitionError(`KILN_TYPE_PACKAGES: ${spec} could not be loaded: ${err instanceof Error ? err.message : String(err)}`)
    }
    const list = Array.isArray(exported) ? exported : exported ? [exported] : []
    if (!list.length) throw new TypeDefinitionError(`KILN_TYPE_PACKAGES: ${spec} exports no resource type (its default export is a list of types, or a function given the SDK that returns them)`)
    for (const t of list) {
      const checked = (() => {
        try {
          return defineResourceType(t as ResourceType)
        } catch (err) {
          throw new TypeDefinitionError(`KILN_TYPE_PACKAGES: ${spec}: ${err instanceof Error ? err.message : String(err)}`)
        }
      })()
      const prefix = checked.name.split('::')[0]!
      if (RESERVED_PREFIXES.includes(prefix)) throw new TypeDefinitionError(`KILN_TYPE_PACKAGES: ${spec}: ${checked.name}: the prefix ${prefix}:: is reserved for Kiln's and Heat's own types`)
      out.push(checked)
    }
  }
  return out
}
