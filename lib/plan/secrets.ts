/**
 * Hidden parameter values and where they may have flowed. A hidden value
 * reaches resource properties and attributes, outputs and messages not only
 * as itself but inside strings (`str_replace`, `list_join`), lists and maps,
 * and it may come from the request, the environment (`parameters`,
 * `parameter_defaults`) or the template's default. `hiddenValues` collects
 * every form of every such value; `redact` (lib/template/secrecy.ts, where
 * evaluation learns the forms of values derived from secrets) masks them
 * anywhere in a JSON value.
 */
import { addForms } from '../template'

export { holdsSecret, MASK, MIN_EMBEDDED, redact, redactText, secretList, Secrets } from '../template'

type Schemas = Record<string, { hidden?: unknown; default?: unknown; type?: unknown } | null | undefined>

const isHidden = (s: { hidden?: unknown } | null | undefined) => s?.hidden === true || s?.hidden === 'true'

/** Every textual form of hidden parameters' values. `sources` are parameter maps by precedence. */
export function hiddenValues(schemas: Schemas | null | undefined, sources: ReadonlyArray<Record<string, unknown> | null | undefined>, into = new Set<string>()): Set<string> {
  if (!schemas || typeof schemas !== 'object') return into
  for (const [name, s] of Object.entries(schemas)) {
    if (!isHidden(s)) continue
    for (const v of [...sources.map((src) => (src && typeof src === 'object' && Object.hasOwn(src, name) ? src[name] : undefined)), s?.default]) {
      addForms(v, s?.type === 'comma_delimited_list', into)
    }
  }
  return into
}
