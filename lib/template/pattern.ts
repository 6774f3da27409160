/**
 * Tenant-written regular expressions (a parameter's `allowed_pattern`) are
 * matched by RE2 (re2js, a pure-JavaScript port): its matching time is linear
 * in the input, so no pattern can backtrack for seconds as `(a|a)+` does in
 * JavaScript's engine. RE2 has no lookaround and no backreferences; a pattern
 * that uses them is refused with the reason, rather than matched differently.
 *
 * Linear is not free: matching costs up to (program size x input length)
 * steps, and compiling costs time in proportion to the program, which counted
 * repetitions multiply (`(x{1,1000}){1,1000}` is refused by RE2, but 600
 * `[a-z]{1,1000}` in a row compile for 16 s). Both are charged to the
 * evaluation budget before the work is done: the compile by an upper bound of
 * the program size worked out from the pattern text (re2js keeps its own
 * estimate internal), the match by the compiled program's size.
 *
 * Patterns that resource types declare in code (lib/resources/builtin) are
 * trusted, may use lookahead, and stay on JavaScript's RegExp.
 */
import { RE2JS } from 're2js'
import type { Budget } from './budget'

/** Charged per instruction of the estimated program before compiling (a compile costs ~100 evaluation steps per instruction). */
const COMPILE_OPS_PER_INSTRUCTION = 100

type Compiled = { ok: true; re: RE2JS } | { ok: false; reason: string }

/** Compiled patterns of this thread, most recently used last. */
const cache = new Map<string, Compiled>()
const CACHE_SIZE = 256

/**
 * An upper bound on the size of the program RE2 compiles `pattern` to: each
 * atom and operator counts one or two instructions, and a counted repetition
 * `{n,m}` multiplies the atom (or group) before it by m (n + 1 when unbounded).
 */
export function estimateProgramSize(pattern: string): number {
  const frames: { total: number; last: number }[] = [{ total: 0, last: 0 }]
  const top = () => frames[frames.length - 1]!
  const atom = (size: number) => {
    top().total += size
    top().last = size
  }
  let i = 0
  while (i < pattern.length) {
    const c = pattern[i]!
    if (c === '\\') {
      const next = pattern[i + 1]
      if (next === 'Q') {
        // \Q...\E: every character a literal.
        const end = pattern.indexOf('\\E', i + 2)
        const stop = end < 0 ? pattern.length : end
        for (let j = i + 2; j < stop; j++) atom(1)
        i = end < 0 ? pattern.length : end + 2
        continue
      }
      i += 2
      if ((next === 'p' || next === 'P' || next === 'x') && pattern[i] === '{') {
        const close = pattern.indexOf('}', i)
        i = close < 0 ? pattern.length : close + 1
      }
      atom(1)
    } else if (c === '[') {
      // A class is one instruction: skip to its closing bracket.
      let j = i + 1
      if (pattern[j] === '^') j++
      if (pattern[j] === ']') j++
      while (j < pattern.length && pattern[j] !== ']') {
        if (pattern[j] === '\\') j += 2
        else if (pattern[j] === '[' && pattern[j + 1] === ':') {
          const close = pattern.indexOf(':]', j + 2)
          j = close < 0 ? j + 1 : close + 2
        } else j++
      }
      i = j + 1
      atom(1)
    } else if (c === '(') {
      i++
      if (pattern[i] === '?') {
        // (?flags) alone changes flags and holds nothing; (?flags:…), (?P<name>…), (?<name>…) open a group.
        let j = i + 1
        while (j < pattern.length && pattern[j] !== ':' && pattern[j] !== ')' && pattern[j] !== '>') j++
        if (pattern[j] === ')') {
          i = j + 1
          continue
        }
        i = j + 1
      }
      frames.push({ total: 0, last: 0 })
    } else if (c === ')') {
      i++
      if (frames.length > 1) {
        const group = frames.pop()!
        atom(group.total + 2)
      }
    } else if (c === '|') {
      i++
      top().total += 1
      top().last = 0
    } else if (c === '*' || c === '+' || c === '?') {
      i++
      top().total += 2
    } else if (c === '{') {
      const m = /^\{(\d+)(?:(,)(\d*))?\}/.exec(pattern.slice(i, i + 24))
      if (!m) {
        i++
        atom(1)
        continue
      }
      i += m[0].length
      const min = Number(m[1])
      const max = m[2] ? (m[3] ? Number(m[3]) : min + 1) : min
      const times = Math.max(1, min, max)
      const f = top()
      f.total += f.last * (times - 1) + times
      f.last *= times
    } else {
      i++
      atom(1)
    }
  }
  let total = 0
  for (const f of frames) total += f.total + 2
  return total
}

function compile(pattern: string): Compiled {
  const hit = cache.get(pattern)
  if (hit) {
    cache.delete(pattern)
    cache.set(pattern, hit)
    return hit
  }
  let out: Compiled
  try {
    out = { ok: true, re: RE2JS.compile(pattern) }
  } catch (err) {
    out = { ok: false, reason: (err as Error).message }
  }
  cache.set(pattern, out)
  if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value!)
  return out
}

/**
 * Compile a tenant pattern, charging its estimated cost first. Returns why it
 * cannot be used (RE2 rejects it) instead of throwing.
 */
export function tenantPattern(pattern: string, budget: Budget): Compiled {
  budget.op(COMPILE_OPS_PER_INSTRUCTION * estimateProgramSize(pattern))
  const compiled = compile(pattern)
  if (compiled.ok) return compiled
  const unsupported = /lookahead|lookbehind|Perl syntax|escape sequence|named capture/.test(compiled.reason)
  return {
    ok: false,
    reason: unsupported
      ? `Kiln matches patterns with RE2 (linear time), which has no lookahead, lookbehind or backreferences: ${compiled.reason}`
      : compiled.reason,
  }
}

/** Whether the whole of `value` matches (as Heat requires: the match must consume the value). */
export function fullMatch(re: RE2JS, value: string, budget: Budget): boolean {
  budget.op(re.programSize() * (value.length + 1))
  return re.matches(value)
}
