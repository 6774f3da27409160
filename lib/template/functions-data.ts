/**
 * The data functions of HOT: given fully evaluated arguments, compute the
 * result. Argument shapes are checked here; a FunctionError's message is
 * reported at the function's path.
 */
import crypto from 'node:crypto'

export class FunctionError extends Error {
  override name = 'FunctionError'
}

const isMap = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

function fail(message: string): never {
  throw new FunctionError(message)
}

/** How a non-string value appears inside a string (Heat json-serialises maps and lists). */
export function stringify(v: unknown): string {
  if (typeof v === 'string') return v
  if (v === null || v === undefined) return ''
  if (typeof v === 'object') return JSON.stringify(v)
  return String(v)
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  if (Array.isArray(a)) return a.length === (b as unknown[]).length && a.every((x, i) => deepEqual(x, (b as unknown[])[i]))
  const ka = Object.keys(a as object)
  const kb = Object.keys(b as object)
  return ka.length === kb.length && ka.every((k) => deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
}

function listJoin(args: unknown): string {
  if (!Array.isArray(args) || args.length < 2 || typeof args[0] !== 'string') fail('list_join takes [delimiter, list, ...more lists]')
  const [delim, ...lists] = args as [string, ...unknown[]]
  const items: unknown[] = []
  for (const l of lists) {
    if (!Array.isArray(l)) fail('list_join: every argument after the delimiter must be a list')
    items.push(...l)
  }
  return items.map(stringify).join(delim)
}

function strReplace(args: unknown, mode: 'lax' | 'strict' | 'vstrict'): string {
  if (!isMap(args) || typeof args.template !== 'string' && typeof args.template !== 'number' || !isMap(args.params)) {
    fail('str_replace takes {template: <string>, params: {<key>: <value>, ...}}')
  }
  let text = stringify(args.template)
  // Longest keys first, so that a key which is a prefix of another does not break it (as Heat does).
  const keys = Object.keys(args.params).sort((a, b) => b.length - a.length || (a < b ? -1 : 1))
  for (const k of keys) {
    const v = (args.params as Record<string, unknown>)[k]
    if (mode !== 'lax' && !text.includes(k)) fail(`str_replace_${mode}: "${k}" does not occur in the template`)
    if (mode === 'vstrict' && (v === '' || v === null || v === undefined)) fail(`str_replace_vstrict: the value of "${k}" is empty`)
    text = text.split(k).join(stringify(v))
  }
  return text
}

function strSplit(args: unknown): unknown {
  if (!Array.isArray(args) || args.length < 2 || args.length > 3 || typeof args[0] !== 'string' || typeof args[1] !== 'string') {
    fail('str_split takes [delimiter, string] or [delimiter, string, index]')
  }
  const parts = (args[1] as string).split(args[0] as string)
  if (args.length === 2) return parts
  const i = Number(args[2])
  if (!Number.isInteger(i) || i < 0 || i >= parts.length) fail(`str_split: index ${JSON.stringify(args[2])} is out of range (0 to ${parts.length - 1})`)
  return parts[i]
}

function substitute(template: unknown, vars: Record<string, string>): unknown {
  const keys = Object.keys(vars).sort((a, b) => b.length - a.length)
  const sub = (s: string) => keys.reduce((acc, k) => acc.split(k).join(vars[k]!), s)
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return sub(v)
    if (Array.isArray(v)) return v.map(walk)
    if (isMap(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [sub(k), walk(x)]))
    return v
  }
  return walk(template)
}

function repeat(args: unknown): unknown[] {
  if (!isMap(args) || !isMap(args.for_each) || !('template' in args)) fail('repeat takes {for_each: {<var>: <list>, ...}, template: <value>, permutations: <bool>}')
  const forEach = args.for_each as Record<string, unknown>
  const names = Object.keys(forEach)
  if (!names.length) fail('repeat: for_each needs at least one variable')
  for (const n of names) if (!Array.isArray(forEach[n])) fail(`repeat: for_each.${n} must be a list`)
  const lists = names.map((n) => (forEach[n] as unknown[]).map(stringify))
  const permutations = args.permutations === undefined ? true : args.permutations
  if (typeof permutations !== 'boolean') fail('repeat: permutations must be true or false')
  const out: unknown[] = []
  if (!permutations) {
    const len = lists[0]!.length
    if (lists.some((l) => l.length !== len)) fail('repeat: with permutations false, every for_each list must have the same length')
    for (let i = 0; i < len; i++) out.push(substitute(args.template, Object.fromEntries(names.map((n, j) => [n, lists[j]![i]!]))))
    return out
  }
  const combos: string[][] = [[]]
  for (const l of lists) {
    const next: string[][] = []
    for (const c of combos) for (const x of l) next.push([...c, x])
    combos.splice(0, combos.length, ...next)
  }
  for (const c of combos) out.push(substitute(args.template, Object.fromEntries(names.map((n, j) => [n, c[j]!]))))
  return out
}

function mapMerge(args: unknown): Record<string, unknown> {
  if (!Array.isArray(args) || !args.every((m) => isMap(m) || m === null)) fail('map_merge takes a list of maps')
  return Object.assign({}, ...(args as Record<string, unknown>[]).filter(Boolean))
}

function mapReplace(args: unknown): Record<string, unknown> {
  if (!Array.isArray(args) || args.length !== 2 || !isMap(args[0]) || !isMap(args[1])) fail('map_replace takes [<map>, {keys: {...}, values: {...}}]')
  const [m, spec] = args as [Record<string, unknown>, Record<string, unknown>]
  for (const k of Object.keys(spec)) if (k !== 'keys' && k !== 'values') fail(`map_replace: unknown key "${k}" (use keys and values)`)
  const keys = (spec.keys ?? {}) as Record<string, unknown>
  const values = (spec.values ?? {}) as Record<string, unknown>
  if (!isMap(keys) || !isMap(values)) fail('map_replace: keys and values must be maps')
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(m)) {
    const nk = k in keys ? stringify(keys[k]) : k
    if (nk in out) fail(`map_replace: key "${nk}" would appear twice`)
    const sv = typeof v === 'string' || typeof v === 'number' ? String(v) : null
    out[nk] = sv !== null && sv in values ? values[sv] : v
  }
  return out
}

function listConcat(args: unknown, unique: boolean): unknown[] {
  if (!Array.isArray(args) || !args.every((l) => Array.isArray(l) || l === null)) fail(`list_concat${unique ? '_unique' : ''} takes a list of lists`)
  const out: unknown[] = []
  for (const l of args as (unknown[] | null)[]) for (const x of l ?? []) if (!unique || !out.some((y) => deepEqual(x, y))) out.push(x)
  return out
}

function digest(args: unknown): string {
  const algs = ['md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512']
  if (!Array.isArray(args) || args.length !== 2 || typeof args[0] !== 'string' || !algs.includes(args[0])) fail(`digest takes [<algorithm: ${algs.join('|')}>, <value>]`)
  return crypto.createHash(args[0] as string).update(stringify(args[1])).digest('hex')
}

function filter(args: unknown): unknown[] {
  if (!Array.isArray(args) || args.length !== 2 || !Array.isArray(args[1]) || !(Array.isArray(args[0]) || args[0] === null)) fail('filter takes [<values to remove>, <list>]')
  const remove = (args[0] ?? []) as unknown[]
  return (args[1] as unknown[]).filter((x) => !remove.some((r) => deepEqual(r, x)))
}

function contains(args: unknown): boolean {
  if (!Array.isArray(args) || args.length !== 2 || !Array.isArray(args[1])) fail('contains takes [<value>, <list>]')
  return (args[1] as unknown[]).some((x) => deepEqual(x, args[0]))
}

function makeUrl(args: unknown): string {
  if (!isMap(args)) fail('make_url takes a map with scheme, host, port, path, query, fragment')
  const keys = ['scheme', 'username', 'password', 'host', 'port', 'path', 'query', 'fragment']
  for (const k of Object.keys(args)) if (!keys.includes(k)) fail(`make_url: unknown key "${k}"`)
  const a = args as Record<string, unknown>
  let host = stringify(a.host ?? '')
  if (host.includes(':') && !host.startsWith('[')) host = `[${host}]`
  const auth = a.username !== undefined ? `${encodeURIComponent(stringify(a.username))}${a.password !== undefined ? ':' + encodeURIComponent(stringify(a.password)) : ''}@` : ''
  const port = a.port !== undefined && a.port !== null && a.port !== '' ? `:${stringify(a.port)}` : ''
  let path = stringify(a.path ?? '')
  if (path && !path.startsWith('/')) path = '/' + path
  let query = ''
  if (isMap(a.query)) query = '?' + new URLSearchParams(Object.entries(a.query).map(([k, v]) => [k, stringify(v)])).toString()
  else if (a.query !== undefined && a.query !== null) fail('make_url: query must be a map')
  const fragment = a.fragment ? `#${stringify(a.fragment)}` : ''
  return `${a.scheme !== undefined ? stringify(a.scheme) + '://' : ''}${auth}${host}${port}${path}${query}${fragment}`
}

/** The data functions by name (get_*, if and conditions are handled by the evaluator). */
export const DATA_FUNCTIONS: Record<string, (args: unknown) => unknown> = {
  list_join: listJoin,
  str_replace: (a) => strReplace(a, 'lax'),
  str_replace_strict: (a) => strReplace(a, 'strict'),
  str_replace_vstrict: (a) => strReplace(a, 'vstrict'),
  str_split: strSplit,
  repeat,
  map_merge: mapMerge,
  map_replace: mapReplace,
  list_concat: (a) => listConcat(a, false),
  list_concat_unique: (a) => listConcat(a, true),
  digest,
  filter,
  contains,
  make_url: makeUrl,
}
