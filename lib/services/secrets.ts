/**
 * Hidden parameter values and where they may have flowed. A hidden value
 * reaches resource properties and attributes, outputs and messages not only
 * as itself but inside strings (`str_replace`, `list_join`), lists and maps,
 * and it may come from the request, the environment (`parameters`,
 * `parameter_defaults`) or the template's default. `hiddenValues` collects
 * every form of every such value; `redact` masks them anywhere in a JSON
 * value, as the engine does in status reasons.
 */
export const MASK = '******'

type Schemas = Record<string, { hidden?: unknown; default?: unknown; type?: unknown } | null | undefined>

const isHidden = (s: { hidden?: unknown } | null | undefined) => s?.hidden === true || s?.hidden === 'true'

/** Every textual form of hidden parameters' values, longest first. `sources` are parameter maps by precedence. */
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

function addForms(v: unknown, list: boolean, into: Set<string>) {
  if (v === undefined || v === null || typeof v === 'boolean') return // a boolean is no secret, and masking true/false everywhere helps nobody
  if (typeof v === 'string') {
    if (v.length) into.add(v)
    if (list) for (const item of v.split(',')) if (item.trim()) into.add(item.trim())
    return
  }
  if (typeof v === 'number') {
    into.add(String(v))
    return
  }
  if (typeof v === 'object') {
    into.add(JSON.stringify(v))
    for (const x of Array.isArray(v) ? v : Object.values(v)) addForms(x, false, into)
  }
}

/** Sorted longest first, so that a value containing another is masked whole. */
export const secretList = (s: Set<string>): string[] => [...s].sort((a, b) => b.length - a.length)

/**
 * Values shorter than this are masked only where they stand alone (a whole string or number):
 * masking every "a" or "1" inside other text would garble everything and protect nothing.
 */
export const MIN_EMBEDDED = 4

/** Mask every hidden value in a string: the whole string, or inside it. */
export function redactText(text: string, secrets: readonly string[]): string {
  for (const s of secrets) {
    if (text === s) return MASK
    if (s.length >= MIN_EMBEDDED && text.includes(s)) text = text.split(s).join(MASK)
  }
  return text
}

/** Mask hidden values anywhere in a JSON value: inside strings, and numbers equal to one. */
export function redact<T>(value: T, secrets: readonly string[]): T {
  if (!secrets.length) return value
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return redactText(v, secrets)
    if (typeof v === 'number') return secrets.includes(String(v)) ? MASK : v
    if (Array.isArray(v)) return v.map(walk)
    if (v && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) return Object.fromEntries(Object.entries(v).map(([k, x]) => [redactText(k, secrets), walk(x)]))
    return v
  }
  return walk(value) as T
}
