/**
 * Comparing property values that may hold UNKNOWN (a value known only after
 * apply), and listing their differences leaf by leaf, as a preview shows
 * them: `value: "a" → "b"`, `networks[0].port: "p1" → (known after apply)`.
 */
import { isDeepStrictEqual } from 'node:util'
import { UNKNOWN } from '../template/types'
import type { ValueChange } from './preview-types'

export type { ValueChange }

export type Comparison = 'same' | 'differs' | 'unknown'

const isMap = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

export function containsUnknown(v: unknown): boolean {
  if (v === UNKNOWN) return true
  if (Array.isArray(v)) return v.some(containsUnknown)
  if (isMap(v)) return Object.values(v).some(containsUnknown)
  return false
}

/**
 * Whether two values are the same, differ, or cannot be told apart until
 * apply. Without UNKNOWN this is exactly the engine's comparison
 * (isDeepStrictEqual, as changedProperties uses); with it, a known part that
 * differs (a list's length, a map's keys, a known item) still says `differs`.
 */
export function compareValues(a: unknown, b: unknown): Comparison {
  if (!containsUnknown(a) && !containsUnknown(b)) return isDeepStrictEqual(a, b) ? 'same' : 'differs'
  if (a === UNKNOWN || b === UNKNOWN) return 'unknown'
  const parts = (results: Comparison[]): Comparison => (results.includes('differs') ? 'differs' : results.includes('unknown') ? 'unknown' : 'same')
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length !== b.length) return 'differs'
    return parts(a.map((x, i) => compareValues(x, b[i])))
  }
  if (isMap(a) && isMap(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)])
    for (const k of keys) if (!Object.hasOwn(a, k) || !Object.hasOwn(b, k)) return 'differs'
    return parts([...keys].map((k) => compareValues(a[k], b[k])))
  }
  // A scalar against a list or a map, with an unknown inside the other: the shapes already differ.
  return 'differs'
}

/** Compare top-level properties as changedProperties does: an absent property counts as null. */
export function compareProperties(before: Record<string, unknown>, after: Record<string, unknown>): Record<string, Comparison> {
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort()
  return Object.fromEntries(keys.map((k) => [k, compareValues(before[k] ?? null, after[k] ?? null)]))
}

const ABSENT = Symbol('absent')
const join = (base: string, key: string | number) => (typeof key === 'number' ? `${base}[${key}]` : base ? `${base}.${key}` : key)

/**
 * The differences between two values, leaf by leaf, at most `max` of them
 * (a caller counts what it cut). Absent values are `undefined` here.
 */
export function valueChanges(before: unknown, after: unknown, path = '', max = 200): { changes: ValueChange[]; more: number } {
  const changes: ValueChange[] = []
  let more = 0
  const push = (c: ValueChange) => {
    if (changes.length < max) changes.push(c)
    else more++
  }
  const walk = (a: unknown, b: unknown, at: string) => {
    if (a === UNKNOWN || b === UNKNOWN) {
      if (a === UNKNOWN && b === UNKNOWN) return push({ path: at, beforeUnknown: true, afterUnknown: true })
      const entry: ValueChange = { path: at }
      if (a === UNKNOWN) entry.beforeUnknown = true
      else if (a !== ABSENT) entry.before = a
      if (b === UNKNOWN) entry.afterUnknown = true
      else if (b !== ABSENT) entry.after = b
      return push(entry)
    }
    if (Array.isArray(a) && Array.isArray(b)) {
      for (let i = 0; i < Math.max(a.length, b.length); i++) walk(i < a.length ? a[i] : ABSENT, i < b.length ? b[i] : ABSENT, join(at, i))
      return
    }
    if (isMap(a) && isMap(b)) {
      for (const k of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) walk(Object.hasOwn(a, k) ? a[k] : ABSENT, Object.hasOwn(b, k) ? b[k] : ABSENT, join(at, k))
      return
    }
    if (a !== ABSENT && b !== ABSENT && !containsUnknown(a) && !containsUnknown(b) && isDeepStrictEqual(a, b)) return
    // A value added or removed whole, or a leaf (or a shape) that changes: unknowns inside it are leaves of their own.
    if ((a === ABSENT || !isMap(a) && !Array.isArray(a)) && containsUnknown(b) && (isMap(b) || Array.isArray(b))) {
      if (a !== ABSENT) push({ path: at, before: a })
      return walk(isMap(b) ? {} : [], b, at)
    }
    if ((b === ABSENT || !isMap(b) && !Array.isArray(b)) && containsUnknown(a) && (isMap(a) || Array.isArray(a))) {
      walk(a, isMap(a) ? {} : [], at)
      if (b !== ABSENT) push({ path: at, after: b })
      return
    }
    const entry: ValueChange = { path: at }
    if (a !== ABSENT) entry.before = a
    if (b !== ABSENT) entry.after = b
    push(entry)
  }
  walk(before === undefined ? ABSENT : before, after === undefined ? ABSENT : after, path)
  return { changes, more }
}
