/**
 * The text Heat makes of a value inside a string, byte for byte: Heat is
 * Python, so `list_join` and `str_replace` serialise a map or a list with
 * `json.dumps(value, sort_keys=True)` (keys sorted, `", "` and `": "`
 * separators, non-ASCII escaped as `\uXXXX`), and `str_replace` turns a
 * scalar into text with `str()` (`True`, `False`, `1e-07`).
 *
 * A number that is an integer is written as one: YAML and JSON give Kiln no
 * way to tell `1.0` from `1`.
 */

const isMap = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

/** Python's repr of a float (also what json.dumps writes): exponent form below 1e-4, with two exponent digits at least. */
function pyNumber(n: number, json: boolean): string {
  if (Number.isNaN(n)) return json ? 'NaN' : 'nan'
  if (!Number.isFinite(n)) return json ? (n > 0 ? 'Infinity' : '-Infinity') : n > 0 ? 'inf' : '-inf'
  if (Number.isInteger(n)) return Math.abs(n) < 1e21 ? String(n) : BigInt(n).toString()
  const [mantissa, exp] = n.toExponential().split('e') as [string, string]
  const e = Number(exp)
  if (e >= -4) return String(n) // fixed notation in both languages (a fraction is below 2^53 < 1e16)
  return `${mantissa}e${e < 0 ? '-' : '+'}${String(Math.abs(e)).padStart(2, '0')}`
}

const ESCAPES: Record<string, string> = { '"': '\\"', '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\b': '\\b', '\f': '\\f' }

/** A JSON string as Python writes it (ensure_ascii): everything outside space to `~` escaped. */
function pyString(s: string): string {
  return `"${s.replace(/[\\"]|[^ -~]/g, (c) => ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}"`
}

/** Python's `json.dumps(v, sort_keys=True)`; `onNode` is called once per node (the caller's budget). */
export function pyJson(v: unknown, onNode?: () => void): string {
  onNode?.()
  if (v === null || v === undefined) return 'null'
  if (typeof v === 'boolean') return v ? 'true' : 'false'
  if (typeof v === 'number') return pyNumber(v, true)
  if (typeof v === 'string') return pyString(v)
  if (Array.isArray(v)) return `[${v.map((x) => pyJson(x, onNode)).join(', ')}]`
  if (isMap(v)) {
    const keys = Object.keys(v).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    return `{${keys.map((k) => `${pyString(k)}: ${pyJson(v[k], onNode)}`).join(', ')}}`
  }
  return pyString(String(v))
}

/** Python's `str()` of a scalar (a string, a number, a boolean). */
export function pyStr(v: string | number | boolean): string {
  if (typeof v === 'string') return v
  if (typeof v === 'boolean') return v ? 'True' : 'False'
  return pyNumber(v, false)
}
