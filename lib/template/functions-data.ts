/**
 * The data functions of HOT: given fully evaluated arguments, compute the
 * result. Argument shapes are checked here; a FunctionError's message is
 * reported at the function's path.
 *
 * Every function charges its work and what it produces to the evaluation's
 * Budget (budget.ts), before the work where the cost can be known first: a
 * `repeat` counts its combinations, a replacement the length of its result.
 * Comparisons of values (list_concat_unique, filter, contains) go through a
 * canonical key per value and a Set, so they are linear, not quadratic.
 */
import crypto from 'node:crypto'
import type { Budget } from './budget'
import { countNodes } from './budget'

export class FunctionError extends Error {
  override name = 'FunctionError'
}

const isMap = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

function fail(message: string): never {
  throw new FunctionError(message)
}

/** How a non-string value appears inside a string (Heat json-serialises maps and lists). */
export function stringify(v: unknown, b?: Budget): string {
  if (typeof v === 'string') return v
  if (v === null || v === undefined) return ''
  if (typeof v === 'object') {
    // Serialising costs about one step per 64 bytes, every time (a shared value is measured once).
    if (b) b.op(1 + (b.measure(v) >> 6))
    return JSON.stringify(v)
  }
  return String(v)
}

export function deepEqual(a: unknown, b: unknown, budget?: Budget): boolean {
  budget?.op()
  if (a === b) return true
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  if (Array.isArray(a)) return a.length === (b as unknown[]).length && a.every((x, i) => deepEqual(x, (b as unknown[])[i], budget))
  const ka = Object.keys(a as object)
  const kb = Object.keys(b as object)
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b as object, k) && deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], budget))
}

/**
 * A string that is equal for two values exactly when deepEqual holds: maps
 * with their keys sorted, numbers and strings told apart. NaN equals nothing,
 * so each NaN gets a key of its own.
 */
function keyer(b: Budget): (v: unknown) => string {
  let nan = 0
  const key = (v: unknown): string => {
    // A key is built, hashed and compared: a few steps per node.
    b.op(2)
    if (typeof v === 'string') return JSON.stringify(v)
    if (typeof v === 'number') return Number.isNaN(v) ? `NaN#${nan++}` : `n${String(v)}`
    if (v === null || typeof v !== 'object') return String(v)
    if (Array.isArray(v)) return `[${v.map(key).join(',')}]`
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${key((v as Record<string, unknown>)[k])}`).join(',')}}`
  }
  return key
}

/** How often `k` occurs in `text` (as split counts it), one operation per occurrence found. */
function occurrences(text: string, k: string, b: Budget): number {
  b.op(1 + (text.length >> 6))
  if (k === '') {
    b.op(text.length)
    return Math.max(0, text.length - 1)
  }
  let n = 0
  for (let at = text.indexOf(k); at >= 0; at = text.indexOf(k, at + k.length)) {
    // Found, then cut out and joined again (or kept as a part).
    b.op(2)
    n++
  }
  return n
}

/** `text` with every `k` replaced by `v`; the growth is charged as output before the string is built. */
function replaceAll(text: string, k: string, v: string, b: Budget): string {
  const n = occurrences(text, k, b)
  if (n === 0) return text
  b.output(Math.max(0, n * (v.length - k.length)))
  return text.split(k).join(v)
}

function listJoin(args: unknown, b: Budget): string {
  if (!Array.isArray(args) || args.length < 2 || typeof args[0] !== 'string') fail('list_join takes [delimiter, list, ...more lists]')
  const [delim, ...lists] = args as [string, ...unknown[]]
  const pieces: string[] = []
  for (const l of lists) {
    if (!Array.isArray(l)) fail('list_join: every argument after the delimiter must be a list')
    b.op(1 + l.length)
    for (const x of l) {
      const s = stringify(x, b)
      b.output(s.length + delim.length)
      pieces.push(s)
    }
  }
  return pieces.join(delim)
}

function strReplace(args: unknown, mode: 'lax' | 'strict' | 'vstrict', b: Budget): string {
  if (!isMap(args) || typeof args.template !== 'string' && typeof args.template !== 'number' || !isMap(args.params)) {
    fail('str_replace takes {template: <string>, params: {<key>: <value>, ...}}')
  }
  let text = stringify(args.template, b)
  // Longest keys first, so that a key which is a prefix of another does not break it (as Heat does).
  const keys = Object.keys(args.params)
  b.op(1 + keys.length * Math.ceil(Math.log2(keys.length + 1)))
  keys.sort((x, y) => y.length - x.length || (x < y ? -1 : 1))
  for (const k of keys) {
    const v = (args.params as Record<string, unknown>)[k]
    if (mode !== 'lax' && !text.includes(k)) fail(`str_replace_${mode}: "${k}" does not occur in the template`)
    if (mode === 'vstrict' && (v === '' || v === null || v === undefined)) fail(`str_replace_vstrict: the value of "${k}" is empty`)
    text = replaceAll(text, k, stringify(v, b), b)
  }
  return text
}

function strSplit(args: unknown, b: Budget): unknown {
  if (!Array.isArray(args) || args.length < 2 || args.length > 3 || typeof args[0] !== 'string' || typeof args[1] !== 'string') {
    fail('str_split takes [delimiter, string] or [delimiter, string, index]')
  }
  const [delim, text] = args as [string, string]
  const n = occurrences(text, delim, b) + 1
  b.output(text.length + 3 * n)
  const parts = text.split(delim)
  if (args.length === 2) return parts
  const i = Number(args[2])
  if (!Number.isInteger(i) || i < 0 || i >= parts.length) fail(`str_split: index ${JSON.stringify(args[2])} is out of range (0 to ${parts.length - 1})`)
  return parts[i]
}

/**
 * Copies of `template` with the variables replaced in every string and key;
 * each node charged as it is made. One copier serves every copy of a repeat
 * (no closures or variable lists made per copy).
 */
function copier(template: unknown, vars: [string, string][], b: Budget): () => unknown {
  const sub = (s: string) => {
    b.output(s.length + 2)
    for (const [k, v] of vars) s = replaceAll(s, k, v, b)
    return s
  }
  const walk = (v: unknown): unknown => {
    b.op()
    if (typeof v === 'string') return sub(v)
    if (Array.isArray(v)) {
      b.output(2 + v.length)
      return v.map(walk)
    }
    if (isMap(v)) {
      b.output(2)
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [sub(k), walk(x)]))
    }
    b.output(8)
    return v
  }
  return () => walk(template)
}

function repeat(args: unknown, b: Budget): unknown[] {
  if (!isMap(args) || !isMap(args.for_each) || !('template' in args)) fail('repeat takes {for_each: {<var>: <list>, ...}, template: <value>, permutations: <bool>}')
  const forEach = args.for_each as Record<string, unknown>
  const names = Object.keys(forEach)
  if (!names.length) fail('repeat: for_each needs at least one variable')
  for (const n of names) if (!Array.isArray(forEach[n])) fail(`repeat: for_each.${n} must be a list`)
  const lists = names.map((n) => {
    const l = forEach[n] as unknown[]
    b.op(1 + l.length)
    return l.map((x) => stringify(x, b))
  })
  const permutations = args.permutations === undefined ? true : args.permutations
  if (typeof permutations !== 'boolean') fail('repeat: permutations must be true or false')
  if (!permutations && lists.some((l) => l.length !== lists[0]!.length)) fail('repeat: with permutations false, every for_each list must have the same length')
  const copies = permutations ? lists.reduce((n, l) => n * l.length, 1) : lists[0]!.length
  // Refused before a single copy is made when the copies alone would spend the budget: each copy
  // costs its making, and each of its nodes a walk and a search per variable.
  b.op(copies * (2 + countNodes(args.template, b.opsLeft) * (1 + names.length)))
  // Longest names first, as the replacement in each copy is done; `vars` holds this copy's values.
  const order = names.map((n, j) => [n, j] as const).sort((x, y) => y[0].length - x[0].length)
  const vars = order.map(([n]) => [n, ''] as [string, string])
  const copy = copier(args.template, vars, b)
  const out: unknown[] = []
  const index = names.map(() => 0)
  for (let c = 0; c < copies; c++) {
    order.forEach(([, j], i) => (vars[i]![1] = lists[j]![permutations ? index[j]! : c]!))
    out.push(copy())
    // The next combination: the last variable varies fastest (as nested loops over for_each in order).
    for (let j = index.length - 1; permutations && j >= 0; j--) {
      if (++index[j]! < lists[j]!.length) break
      index[j] = 0
    }
  }
  return out
}

function mapMerge(args: unknown, b: Budget): Record<string, unknown> {
  if (!Array.isArray(args) || !args.every((m) => isMap(m) || m === null)) fail('map_merge takes a list of maps')
  // A loop, not Object.assign(...maps): a spread of a few hundred thousand arguments overflows the stack.
  const merged = new Map<string, unknown>()
  for (const m of args as (Record<string, unknown> | null)[]) {
    b.op()
    if (m) for (const [k, v] of Object.entries(m)) {
      b.op()
      merged.set(k, v)
    }
  }
  const out = Object.fromEntries(merged)
  b.produced(out)
  return out
}

function mapReplace(args: unknown, b: Budget): Record<string, unknown> {
  if (!Array.isArray(args) || args.length !== 2 || !isMap(args[0]) || !isMap(args[1])) fail('map_replace takes [<map>, {keys: {...}, values: {...}}]')
  const [m, spec] = args as [Record<string, unknown>, Record<string, unknown>]
  for (const k of Object.keys(spec)) if (k !== 'keys' && k !== 'values') fail(`map_replace: unknown key "${k}" (use keys and values)`)
  const keys = (spec.keys ?? {}) as Record<string, unknown>
  const values = (spec.values ?? {}) as Record<string, unknown>
  if (!isMap(keys) || !isMap(values)) fail('map_replace: keys and values must be maps')
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(m)) {
    b.op()
    const nk = Object.hasOwn(keys, k) ? stringify(keys[k], b) : k
    if (Object.hasOwn(out, nk)) fail(`map_replace: key "${nk}" would appear twice`)
    const sv = typeof v === 'string' || typeof v === 'number' ? String(v) : null
    out[nk] = sv !== null && Object.hasOwn(values, sv) ? values[sv] : v
  }
  b.produced(out)
  return out
}

function listConcat(args: unknown, unique: boolean, b: Budget): unknown[] {
  if (!Array.isArray(args) || !args.every((l) => Array.isArray(l) || l === null)) fail(`list_concat${unique ? '_unique' : ''} takes a list of lists`)
  const out: unknown[] = []
  const seen = new Set<string>()
  const key = keyer(b)
  for (const l of args as (unknown[] | null)[]) {
    b.op(1 + (l?.length ?? 0))
    for (const x of l ?? []) {
      if (unique) {
        const k = key(x)
        if (seen.has(k)) continue
        seen.add(k)
      }
      out.push(x)
    }
  }
  b.produced(out)
  return out
}

function digest(args: unknown, b: Budget): string {
  const algs = ['md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512']
  if (!Array.isArray(args) || args.length !== 2 || typeof args[0] !== 'string' || !algs.includes(args[0])) fail(`digest takes [<algorithm: ${algs.join('|')}>, <value>]`)
  const text = stringify(args[1], b)
  b.op(1 + (text.length >> 6))
  b.output(130)
  return crypto.createHash(args[0] as string).update(text).digest('hex')
}

function filter(args: unknown, b: Budget): unknown[] {
  if (!Array.isArray(args) || args.length !== 2 || !Array.isArray(args[1]) || !(Array.isArray(args[0]) || args[0] === null)) fail('filter takes [<values to remove>, <list>]')
  const key = keyer(b)
  const remove = new Set(((args[0] ?? []) as unknown[]).map(key))
  const out = (args[1] as unknown[]).filter((x) => !remove.has(key(x)))
  b.produced(out)
  return out
}

function contains(args: unknown, b: Budget): boolean {
  if (!Array.isArray(args) || args.length !== 2 || !Array.isArray(args[1])) fail('contains takes [<value>, <list>]')
  const key = keyer(b)
  const wanted = key(args[0])
  return (args[1] as unknown[]).some((x) => key(x) === wanted)
}

function makeUrl(args: unknown, b: Budget): string {
  if (!isMap(args)) fail('make_url takes a map with scheme, host, port, path, query, fragment')
  const keys = ['scheme', 'username', 'password', 'host', 'port', 'path', 'query', 'fragment']
  for (const k of Object.keys(args)) if (!keys.includes(k)) fail(`make_url: unknown key "${k}"`)
  const a = args as Record<string, unknown>
  const s = (v: unknown) => stringify(v, b)
  let host = s(a.host ?? '')
  if (host.includes(':') && !host.startsWith('[')) host = `[${host}]`
  const auth = a.username !== undefined ? `${encodeURIComponent(s(a.username))}${a.password !== undefined ? ':' + encodeURIComponent(s(a.password)) : ''}@` : ''
  const port = a.port !== undefined && a.port !== null && a.port !== '' ? `:${s(a.port)}` : ''
  let path = s(a.path ?? '')
  if (path && !path.startsWith('/')) path = '/' + path
  let query = ''
  if (isMap(a.query)) {
    b.op(Object.keys(a.query).length)
    query = '?' + new URLSearchParams(Object.entries(a.query).map(([k, v]) => [k, s(v)])).toString()
  } else if (a.query !== undefined && a.query !== null) fail('make_url: query must be a map')
  const fragment = a.fragment ? `#${s(a.fragment)}` : ''
  const url = `${a.scheme !== undefined ? s(a.scheme) + '://' : ''}${auth}${host}${port}${path}${query}${fragment}`
  b.output(url.length)
  return url
}

/** The data functions by name (get_*, if and conditions are handled by the evaluator). */
export const DATA_FUNCTIONS: Record<string, (args: unknown, budget: Budget) => unknown> = {
  list_join: listJoin,
  str_replace: (a, b) => strReplace(a, 'lax', b),
  str_replace_strict: (a, b) => strReplace(a, 'strict', b),
  str_replace_vstrict: (a, b) => strReplace(a, 'vstrict', b),
  str_split: strSplit,
  repeat,
  map_merge: mapMerge,
  map_replace: mapReplace,
  list_concat: (a, b) => listConcat(a, false, b),
  list_concat_unique: (a, b) => listConcat(a, true, b),
  digest,
  filter,
  contains,
  make_url: makeUrl,
}
