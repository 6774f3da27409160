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
import { pyJson, pyStr } from './pyjson'

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

/** A map or a list as Heat writes it into a string (json.dumps, sorted keys); the serialisation is charged as it goes. */
function jsonText(v: unknown, b: Budget): string {
  const text = pyJson(v, () => b.op())
  b.output(text.length)
  return text
}

/**
 * list_join before 2015-10-15 (Heat's Join): exactly one list, of strings (null joins as '').
 * From 2015-10-15 (JoinMultiple): one or more lists (a null or empty one is skipped), whose
 * maps and lists are joined as JSON; a number or a boolean is refused, as Heat refuses it.
 */
function listJoin(args: unknown, multiple: boolean, b: Budget): string {
  const usage = multiple ? 'list_join takes [delimiter, list, ...more lists]' : 'list_join takes [delimiter, list] (more lists need heat_template_version 2015-10-15)'
  if (!Array.isArray(args) || args.length < 2 || (!multiple && args.length !== 2)) fail(usage)
  const [delim, ...lists] = args as [unknown, ...unknown[]]
  const items: unknown[] = []
  for (const l of lists) {
    if (l === null || (multiple && (l === '' || l === 0 || l === false))) continue // Heat: `if jl:` (and Join: None is [])
    if (!Array.isArray(l)) fail('list_join must operate on a list: every argument after the delimiter must be a list')
    b.op(1 + l.length)
    for (const x of l) items.push(x)
  }
  if (typeof delim !== 'string') fail('list_join: the delimiter must be a string')
  const pieces: string[] = []
  for (const x of items) {
    let s: string
    if (x === null || x === undefined) s = ''
    else if (typeof x === 'string') s = x
    else if (multiple && typeof x === 'object') s = jsonText(x, b)
    else fail(`list_join: items to join must be ${multiple ? 'string, map or list' : 'strings'}, not ${pyJson(x).slice(0, 200)}`)
    b.output(s.length + delim.length)
    pieces.push(s)
  }
  return pieces.join(delim)
}

type ReplaceMode = 'plain' | 'lax' | 'strict' | 'vstrict'
const REPLACE_NAME: Record<ReplaceMode, string> = { plain: 'str_replace', lax: 'str_replace', strict: 'str_replace_strict', vstrict: 'str_replace_vstrict' }

/**
 * A str_replace value as text: Python's str() of a scalar, JSON of a map or list (only from
 * 2015-10-15: Heat's Replace refuses them), '' for null; str_replace_vstrict refuses an empty one.
 */
function replacement(v: unknown, key: string, mode: ReplaceMode, b: Budget): string {
  const name = REPLACE_NAME[mode]
  const empty = () => fail(`${name} has an undefined or empty value for param ${key}, must be a defined non-empty value`)
  if (v === null || v === undefined) return mode === 'vstrict' ? empty() : ''
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') {
    const text = pyStr(v)
    return mode === 'vstrict' && !text ? empty() : text
  }
  if (mode === 'plain') fail(`"${name}" params must be strings or numbers, param ${key} is not valid`)
  if (mode === 'vstrict' && (Array.isArray(v) ? v.length === 0 : Object.keys(v as object).length === 0)) empty()
  return jsonText(v, b)
}

/**
 * str_replace as Heat does it: the keys are tried longest first (equal lengths in code point
 * order), and each key only in the text left between the matches of the keys before it, so a
 * value put in is never searched again.
 */
function strReplace(args: unknown, mode: ReplaceMode, b: Budget): string {
  const name = REPLACE_NAME[mode]
  if (!isMap(args) || !('template' in args) || !('params' in args)) fail(`${name} takes {template: <string>, params: {<key>: <value>, ...}}`)
  if (typeof args.template !== 'string') fail(`"${name}" template must be a string`)
  if (!isMap(args.params)) fail(`"${name}" params must be a map`)
  const params = args.params as Record<string, unknown>
  const keys = Object.keys(params)
  b.op(1 + keys.length * Math.ceil(Math.log2(keys.length + 1)))
  keys.sort((x, y) => y.length - x.length || (x < y ? -1 : x > y ? 1 : 0))
  // The text as pieces: strings still to search, and values already put in (boxed, never searched).
  let pieces: (string | { done: string })[] = [args.template]
  const missing: string[] = []
  for (const k of keys) {
    if (!k) fail(`${name}: a param key must not be empty`)
    const value = replacement(params[k], k, mode, b)
    let found = false
    const next: (string | { done: string })[] = []
    for (const p of pieces) {
      if (typeof p !== 'string') {
        next.push(p)
        continue
      }
      const n = occurrences(p, k, b)
      if (n === 0) {
        next.push(p)
        continue
      }
      found = true
      b.output(n * value.length)
      p.split(k).forEach((part, i) => {
        if (i > 0) next.push({ done: value })
        if (part) next.push(part)
      })
    }
    b.op(1 + next.length)
    pieces = next
    if (!found) missing.push(k)
  }
  if (mode !== 'plain' && mode !== 'lax' && missing.length) fail(`The following params were not found in the template: ${missing.join(',')}`)
  return pieces.map((p) => (typeof p === 'string' ? p : p.done)).join('')
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

/** What each Heat repeat class accepts: Repeat (lists), RepeatWithMap (maps too), RepeatWithNestedLoop (permutations). */
interface RepeatKind {
  maps: boolean
  permutations: boolean
}

/**
 * repeat: a copy of the template per combination of the for_each values (every combination, the
 * last variable varying fastest, or with `permutations: false` the i-th value of each). A map
 * gives its keys (from 2016-10-14, and not with permutations false); a null gives no values.
 */
function repeat(args: unknown, kind: RepeatKind, b: Budget): unknown[] {
  if (!isMap(args) || !('for_each' in args) || !('template' in args)) fail('repeat takes {for_each: {<var>: <list>, ...}, template: <value>' + (kind.permutations ? ', permutations: <bool>}' : '}'))
  if (!isMap(args.for_each)) fail('The "for_each" argument to "repeat" must contain a map')
  if ('permutations' in args && !kind.permutations) fail('repeat: permutations needs heat_template_version 2017-09-01 or later')
  const forEach = args.for_each as Record<string, unknown>
  const names = Object.keys(forEach)
  if (!names.length) fail('repeat: for_each needs at least one variable')
  const permutations = args.permutations === undefined ? true : args.permutations
  if (typeof permutations !== 'boolean') fail('"permutations" should be boolean type for repeat function')
  const maps = kind.maps && permutations
  const what = maps ? 'lists or maps' : 'lists'
  const lists = names.map((n) => {
    const v = forEach[n]
    if (v === null || v === undefined) return null
    if (!Array.isArray(v) && !(maps && isMap(v))) fail(`The values of the "for_each" argument to "repeat" must be ${what} (for_each.${n} is not)`)
    const items = Array.isArray(v) ? v : Object.keys(v as object)
    b.op(1 + items.length)
    return items.map((x) => stringify(x, b))
  })
  const given = lists.filter((l): l is string[] => l !== null)
  if (!permutations && new Set(given.map((l) => l.length)).size > 1) fail('For repeat, the length of for_each values should be equal if no nested loop.')
  const values = lists.map((l) => l ?? [])
  const copies = permutations ? values.reduce((n, l) => n * l.length, 1) : Math.min(...values.map((l) => l.length))
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
    order.forEach(([, j], i) => (vars[i]![1] = values[j]![permutations ? index[j]! : c]!))
    out.push(copy())
    // The next combination: the last variable varies fastest (as nested loops over for_each in order).
    for (let j = index.length - 1; permutations && j >= 0; j--) {
      if (++index[j]! < values[j]!.length) break
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
  list_join: (a, b) => listJoin(a, true, b),
  'list_join@2013-05-23': (a, b) => listJoin(a, false, b),
  str_replace: (a, b) => strReplace(a, 'lax', b),
  'str_replace@2013-05-23': (a, b) => strReplace(a, 'plain', b),
  str_replace_strict: (a, b) => strReplace(a, 'strict', b),
  str_replace_vstrict: (a, b) => strReplace(a, 'vstrict', b),
  str_split: strSplit,
  repeat: (a, b) => repeat(a, { maps: true, permutations: true }, b),
  'repeat@2016-10-14': (a, b) => repeat(a, { maps: true, permutations: false }, b),
  'repeat@2015-04-30': (a, b) => repeat(a, { maps: false, permutations: false }, b),
  map_merge: mapMerge,
  map_replace: mapReplace,
  list_concat: (a, b) => listConcat(a, false, b),
  list_concat_unique: (a, b) => listConcat(a, true, b),
  digest,
  filter,
  contains,
  make_url: makeUrl,
}
