/**
 * The templates of the adversarial review's reproductions ("no template can
 * stall the service"), shared by bench/bombs.ts and the regression tests.
 */
const HOT = '2018-08-31'

const template = (t: Record<string, unknown>) => JSON.stringify({ heat_template_version: HOT, ...t })

/** `allowed_pattern: (a|a)+` against 28 `a`s and a `!`: 13.6 s of JavaScript backtracking, x2-3 per extra character. */
export function redosPattern(as = 28): string {
  return template({ parameters: { p: { type: 'string', default: 'a'.repeat(as) + '!', constraints: [{ allowed_pattern: '(a|a)+' }] } }, resources: {} })
}

/** About 1 KB of nested `repeat`: each level copies the level below `width` times (width^levels values). */
export function nestedRepeat(levels = 6, width = 20): string {
  let inner: unknown = 'x'
  for (let i = 0; i < levels; i++) inner = { repeat: { for_each: { [`%v${i}%`]: Array.from({ length: width }, (_, j) => j) }, template: { l: inner } } }
  return template({ resources: { bomb: { type: 'OS::Heat::None', properties: { value: inner } } } })
}

/** A list of `n` distinct items, comma-joined. */
export const items = (n: number) => Array.from({ length: n }, (_, i) => `i${i}`).join(',')

/** `list_concat_unique` over `str_split` of an n-item string: every item compared with every other (quadratic) before. */
export function uniqueSplit(n = 80_000): string {
  return template({
    parameters: { s: { type: 'string', default: items(n) } },
    resources: { r: { type: 'OS::Heat::None', properties: { value: { list_concat_unique: [{ str_split: [',', { get_param: 's' }] }] } } } },
    outputs: { id: { value: { get_resource: 'r' } } },
  })
}

/** `repeat` over `combinations` values (two lists): 5xx above about 120,000 before (a spread of every combination). */
export function wideRepeat(combinations = 1_000_000): string {
  const a = Math.ceil(Math.sqrt(combinations))
  const b = Math.ceil(combinations / a)
  return template({ resources: { r: { type: 'OS::Heat::None', properties: { value: { repeat: { for_each: { '%a%': Array.from({ length: a }, (_, i) => i), '%b%': Array.from({ length: b }, (_, i) => i) }, template: '%a%-%b%' } } } } } })
}

/** JSON text nested `depth` deep inside a property: a stack overflow (5xx) before. */
export function deepJson(depth = 4000): string {
  return `{"heat_template_version": "${HOT}", "resources": {"a": {"type": "OS::Heat::None", "properties": {"x": ${'['.repeat(depth)}${']'.repeat(depth)}}}}}`
}

/** `n` resources: refused only after seconds of evaluation before (the count came last). */
export function manyResources(n = 20_001): string {
  const resources: Record<string, unknown> = {}
  for (let i = 0; i < n; i++) resources[`r${i}`] = { type: 'OS::Heat::None' }
  return template({ resources })
}

/**
 * Run time: `src` holds an n-item string; `unique` is list_concat_unique over
 * its split (quadratic before: 80k items blocked a worker past its lease);
 * `bomb` is a repeat over the split twice (n^2 copies), past any budget.
 */
export function runtimeBombs(n = 80_000, opts: { unique?: boolean; bomb?: boolean } = {}): string {
  const split = { str_split: [',', { get_attr: ['src', 'value'] }] }
  const resources: Record<string, unknown> = { src: { type: 'OS::Heat::Value', properties: { value: { get_param: 's' } } } }
  if (opts.unique !== false) resources.unique = { type: 'OS::Heat::Value', properties: { value: { list_concat_unique: [split] } } }
  if (opts.bomb !== false) resources.bomb = { type: 'OS::Heat::Value', properties: { value: { repeat: { for_each: { '%a%': split, '%b%': split }, template: '%a%%b%' } } } }
  return template({ parameters: { s: { type: 'string', default: items(n) } }, resources })
}

/** A plain stack: `n` test resources in a chain, each waiting `waitSecs`. */
export function chain(n: number, waitSecs = 0): string {
  const resources: Record<string, unknown> = {}
  for (let i = 0; i < n; i++) resources[`r${i}`] = { type: 'OS::Heat::TestResource', properties: { value: `v${i}`, wait_secs: waitSecs }, ...(i ? { depends_on: [`r${i - 1}`] } : {}) }
  return template({ resources })
}
