/**
 * How a read shows what may hold a secret: hidden parameters and secret
 * attributes and properties as the mask, every other value with the stack's
 * secrets redacted (lib/plan/secrets.ts), and a large value cut to what its
 * schema shows.
 */
import type { StoredDrift } from '../../db/queries/drift'
import { MASK, redact, type Secrets } from '../../plan/secrets'
import type { Registry } from '../../resources/registry'
import { shownValue } from '../../resources/schema'

type TypeLookup = Pick<Registry, 'get'>

const isHidden = (s: { hidden?: unknown } | null | undefined) => s?.hidden === true || s?.hidden === 'true'

/** Parameter values with hidden ones masked. */
export function maskedParameters(t: { template: Record<string, unknown>; parameters: Record<string, unknown> } | null): Record<string, unknown> {
  if (!t) return {}
  const schemas = (t.template.parameters ?? {}) as Record<string, { hidden?: unknown; default?: unknown }>
  const out: Record<string, unknown> = {}
  for (const [name, s] of Object.entries(schemas)) {
    const v = name in t.parameters ? t.parameters[name] : s?.default
    out[name] = isHidden(s) ? MASK : v ?? null
  }
  return out
}

/** The environment as stored, with hidden parameters' entries masked. */
export function maskEnvironment(t: { template: Record<string, unknown>; environment: Record<string, unknown> | null }, secrets: Secrets): Record<string, unknown> {
  const env = { ...((t.environment ?? {}) as Record<string, unknown>) }
  const schemas = (t.template.parameters ?? {}) as Record<string, { hidden?: unknown } | null>
  for (const section of ['parameters', 'parameter_defaults']) {
    const values = env[section]
    if (!values || typeof values !== 'object') continue
    env[section] = Object.fromEntries(Object.entries(values as Record<string, unknown>).map(([k, v]) => [k, isHidden(schemas[k]) ? MASK : v]))
  }
  return redact(env, secrets)
}

/** Attributes as shown; `requested`: a show of this one resource, where those its type shows on request appear as they are. */
export function maskAttributes(types: TypeLookup, type: string, attrs: Record<string, unknown> | null, secrets: Secrets, requested = false): Record<string, unknown> {
  const t = types.get(type)
  if (!attrs) return {}
  return Object.fromEntries(
    Object.entries(attrs).map(([k, v]) => {
      const schema = t?.attributes[k]
      if (requested && schema?.shownOnRequest) return [k, v]
      return [k, schema?.secret ? MASK : redact(v, secrets)]
    }),
  )
}

export function maskProperties(types: TypeLookup, type: string, props: Record<string, unknown> | null, secrets: Secrets): Record<string, unknown> | null {
  if (!props) return null
  const t = types.get(type)
  // A large value (a file's content) is cut to what its schema shows (shownUpToBytes).
  return Object.fromEntries(Object.entries(props).map(([k, v]) => [k, t?.properties[k]?.secret ? MASK : shownValue(t?.properties[k], redact(v, secrets))]))
}

/** A drift finding's changes as shown: secret properties masked, hidden values redacted, long values cut. */
export function maskChanges(types: TypeLookup, type: string | null, changes: StoredDrift['results'][number]['changes'], secrets: Secrets) {
  const shown = (v: unknown, property: string) => maskProperties(types, type ?? '', { [property]: v }, secrets)![property]
  return changes.map((c) => ({ property: c.property, stored: shown(c.stored, c.property), seen: shown(c.seen, c.property) }))
}
