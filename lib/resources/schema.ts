/**
 * Property schemas: validating, coercing and defaulting a resource's
 * properties as Heat does (heat/engine/properties.py, constraints.py):
 * a null value counts as absent, numeric strings become numbers, "true"/"yes"
 * become booleans, numbers become strings where a string is wanted, defaults
 * fill what is missing, and every problem is reported at its property path.
 */
import { isDeepStrictEqual } from 'node:util'
import type { PropertyConstraint, PropertyIssue, PropertySchema } from './types'

export interface ValidateOptions {
  /** Values to leave unchecked (a preview's not-yet-known values). */
  skip?: (value: unknown) => boolean
  /** Keep properties the schema does not name instead of reporting them. */
  acceptUnknown?: boolean
}

export interface Validated {
  value: Record<string, unknown>
  issues: PropertyIssue[]
}

const TRUE = ['true', 'yes', 'on', 'y', 't', '1']
const FALSE = ['false', 'no', 'off', 'n', 'f', '0']

export function validateProperties(schema: Record<string, PropertySchema>, props: Record<string, unknown>, opts: ValidateOptions = {}): Validated {
  const issues: PropertyIssue[] = []
  const value = validateMap(schema, props ?? {}, '', issues, opts)
  return { value, issues }
}

function validateMap(schema: Record<string, PropertySchema>, given: Record<string, unknown>, base: string, issues: PropertyIssue[], opts: ValidateOptions): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [key, v] of Object.entries(given)) {
    if (!(key in schema)) {
      if (opts.acceptUnknown) out[key] = v
      else issues.push({ path: join(base, key), message: `Unknown Property ${key}${suggest(key, Object.keys(schema))}` })
    }
  }
  for (const [key, s] of Object.entries(schema)) {
    const path = join(base, key)
    const raw = given[key]
    if (raw === undefined || raw === null) {
      // Only a map or list default is copied (a caller may change it); numbers, strings and booleans are immutable.
      if (s.default !== undefined) out[key] = typeof s.default === 'object' && s.default !== null ? structuredClone(s.default) : s.default
      else if (s.required) issues.push({ path, message: `Property ${key} not assigned` })
      continue
    }
    out[key] = validateValue(s, raw, path, issues, opts)
  }
  return out
}

function validateValue(s: PropertySchema, raw: unknown, path: string, issues: PropertyIssue[], opts: ValidateOptions): unknown {
  if (opts.skip?.(raw)) return raw
  const bad = (message: string) => {
    issues.push({ path, message })
    return raw
  }
  let v: unknown = raw
  switch (s.type) {
    case 'string':
      if (typeof v === 'number' || typeof v === 'boolean') v = String(v)
      else if (typeof v !== 'string') return bad(`Value must be a string, not ${kind(v)}`)
      break
    case 'integer': {
      const n = toInteger(v)
      if (n === null) {
        const tooBig = (typeof v === 'number' && Number.isInteger(v)) || (typeof v === 'string' && INTEGER_TEXT.test(v))
        return bad(tooBig ? `Value '${display(v)}' is too large an integer (at most ${Number.MAX_SAFE_INTEGER} either side of 0)` : `Value '${display(v)}' is not an integer`)
      }
      v = n
      break
    }
    case 'number': {
      const n = toNumber(v)
      if (n === null) return bad(`Value '${display(v)}' is not a number`)
      v = n
      break
    }
    case 'boolean':
      if (typeof v === 'string' && TRUE.includes(v.toLowerCase())) v = true
      else if (typeof v === 'string' && FALSE.includes(v.toLowerCase())) v = false
      else if (typeof v !== 'boolean') return bad(`Value '${display(v)}' is not a boolean`)
      break
    case 'map':
      if (typeof v !== 'object' || v === null || Array.isArray(v)) return bad(`Value must be a map, not ${kind(v)}`)
      if (s.schema) v = validateMap(s.schema, v as Record<string, unknown>, path, issues, opts)
      break
    case 'list':
      if (typeof v === 'string') v = v === '' ? [] : v.split(',') // Heat accepts a comma-delimited string for a list
      if (!Array.isArray(v)) return bad(`Value must be a list, not ${kind(v)}`)
      if (s.items) v = (v as unknown[]).map((item, i) => validateValue(s.items!, item, `${path}[${i}]`, issues, opts))
      break
    case 'any':
      break
  }
  for (const c of s.constraints ?? []) {
    const broken = checkConstraint(c, v)
    if (broken) issues.push({ path, message: c.description ?? broken })
  }
  return v
}

/**
 * Heat converts an Integer property with Python's int() (Schema.str_to_num,
 * then "not an integer" for a float): a JSON integer, or a string of decimal
 * digits. Stricter than int() where JavaScript would otherwise guess: no
 * surrounding blanks, no `0x10`, no `1_000`, no exponent, and only values
 * JavaScript holds exactly (1e20 passes Number.isInteger but is not the
 * integer the template wrote).
 */
const INTEGER_TEXT = /^[+-]?\d+$/
const NUMBER_TEXT = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/

function toInteger(v: unknown): number | null {
  const n = typeof v === 'string' && INTEGER_TEXT.test(v) ? Number(v) : v
  if (typeof n !== 'number' || !Number.isSafeInteger(n)) return null
  return n === 0 ? 0 : n // never -0
}

/** A JSON number, or a decimal string (Heat: int() or float()); never hex, blanks, Infinity or NaN. */
function toNumber(v: unknown): number | null {
  const n = typeof v === 'string' && NUMBER_TEXT.test(v) ? Number(v) : v
  if (typeof n !== 'number' || !Number.isFinite(n)) return null
  return n
}

function checkConstraint(c: PropertyConstraint, v: unknown): string | null {
  if ('length' in c) {
    const len = typeof v === 'string' || Array.isArray(v) ? v.length : typeof v === 'object' && v !== null ? Object.keys(v).length : null
    if (len === null) return null
    if (c.length.min !== undefined && len < c.length.min) return `length must be at least ${c.length.min} (is ${len})`
    if (c.length.max !== undefined && len > c.length.max) return `length must be at most ${c.length.max} (is ${len})`
  } else if ('range' in c) {
    if (typeof v !== 'number') return null
    if (c.range.min !== undefined && v < c.range.min) return `${v} is out of range (min: ${c.range.min}${c.range.max !== undefined ? `, max: ${c.range.max}` : ''})`
    if (c.range.max !== undefined && v > c.range.max) return `${v} is out of range (${c.range.min !== undefined ? `min: ${c.range.min}, ` : ''}max: ${c.range.max})`
  } else if ('allowed_values' in c) {
    if (!c.allowed_values.some((a) => isDeepStrictEqual(a, v))) return `"${display(v)}" is not an allowed value [${c.allowed_values.map(display).join(', ')}]`
  } else if ('allowed_pattern' in c) {
    if (typeof v === 'string' && !new RegExp(`^(?:${c.allowed_pattern})$`).test(v)) return `"${v}" does not match pattern "${c.allowed_pattern}"`
  } else if ('program' in c) {
    if (Array.isArray(v) && v.length > 0 && !c.program.includes(String(v[0]))) return `"${display(v[0])}" is not an allowed program [${c.program.join(', ')}]`
  } else if ('bytes' in c) {
    const size = typeof v === 'string' ? Buffer.byteLength(v) : null
    if (size !== null && size > c.bytes.max) return `${size} bytes is too large (at most ${c.bytes.max} bytes)`
  }
  return null
}

/** Names of top-level properties whose value differs (sorted). */
export function changedProperties(before: Record<string, unknown>, after: Record<string, unknown>): string[] {
  const keys = new Set([...Object.keys(before), ...Object.keys(after)])
  return [...keys].filter((k) => !isDeepStrictEqual(before[k] ?? null, after[k] ?? null)).sort()
}

/**
 * The changed properties that cannot be updated in place (so the resource is
 * replaced). Properties the schema does not declare can only exist on types
 * that accept any property (OS::Heat::None) and are updated in place.
 */
export function needsReplacement(schema: Record<string, PropertySchema>, changed: string[]): string[] {
  return changed.filter((k) => k in schema && !schema[k]!.updateAllowed)
}

/** Property values with every `secret` property masked, for API responses and events. */
export function maskSecrets(schema: Record<string, PropertySchema>, props: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(props).map(([k, v]) => [k, schema[k]?.secret && v !== null && v !== undefined ? '******' : v]))
}

/**
 * A property value as API responses show it: a string longer than the
 * schema's `shownUpToBytes` is cut there (on a character boundary) and
 * followed by a note of its full size.
 */
export function shownValue(s: PropertySchema | undefined, v: unknown): unknown {
  const limit = s?.shownUpToBytes
  // A UTF-16 code unit is at most 3 bytes of UTF-8: short strings need no encoding.
  if (limit === undefined || typeof v !== 'string' || v.length * 3 <= limit) return v
  const bytes = Buffer.from(v)
  if (bytes.length <= limit) return v
  // Decoding a cut in the middle of a character gives U+FFFD at the end; drop it.
  const head = bytes.subarray(0, limit).toString('utf8').replace(/\uFFFD$/, '')
  return `${head}… [${bytes.length} bytes in all; the first ${limit} shown]`
}

const join = (base: string, key: string) => (base ? `${base}.${key}` : key)
const kind = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'a list' : typeof v === 'object' ? 'a map' : `a ${typeof v}`)
const display = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v))

function suggest(key: string, known: string[]): string {
  const near = known.map((k) => ({ k, d: distance(key.toLowerCase(), k.toLowerCase()) })).filter((x) => x.d <= 2).sort((a, b) => a.d - b.d)[0]
  return near ? `; did you mean ${near.k}?` : known.length ? `; known properties: ${known.join(', ')}` : ''
}

/** Levenshtein distance (typos in property names). */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i)
  for (let i = 1; i <= a.length; i++) {
    const cur = [i]
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    prev = cur
  }
  return prev[b.length]!
}
