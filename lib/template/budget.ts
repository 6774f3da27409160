/**
 * Evaluation budgets. A template is tenant input: a kilobyte of nested
 * `repeat` asks for billions of values, and any function can be fed a huge
 * parameter many times over. Every evaluation therefore runs against a
 * Budget that counts
 *
 *   operations  one per template node visited, per list item or map key a
 *               function handles, per step of a pattern match, per node of a
 *               value it measures (KILN_TEMPLATE_EVAL_MAX_OPS);
 *   output      the size, in bytes of JSON, of every value a function
 *               produces or a reference (get_param, get_attr) brings in, each
 *               time it does (KILN_TEMPLATE_EVAL_MAX_OUTPUT_BYTES): a shared
 *               value is stored and sent once per use;
 *   depth       how deeply a template or a value nests (KILN_TEMPLATE_EVAL_MAX_DEPTH),
 *               checked before anything walks it recursively;
 *
 * and throws BudgetExceeded, naming the budget and where it ran out, as soon
 * as one is spent. Costs are charged before the work where they can be
 * computed first (a `repeat`'s combinations, a `str_replace`'s result), so a
 * bomb is stopped before it allocates. The wall-clock limit
 * (KILN_TEMPLATE_EVAL_TIMEOUT_MS) is enforced by the evaluation pool, which
 * runs the evaluation on another thread (lib/evaluation).
 */

export interface EvaluationLimits {
  maxOps: number
  maxOutputBytes: number
  maxDepth: number
}

/**
 * Generous for real templates (a 10,000-resource template evaluates in about
 * 70,000 operations; Heat's functional-test templates in a few hundred) and
 * small enough that the largest evaluation they allow ends well within a
 * second (bench/bombs.ts measures each bomb).
 */
export const DEFAULT_EVALUATION_LIMITS: EvaluationLimits = Object.freeze({ maxOps: 1_000_000, maxOutputBytes: 8 * 1024 * 1024, maxDepth: 100 })

export type BudgetKind = 'operations' | 'output' | 'depth' | 'time'

/** The setting that sets each budget, named in every refusal. */
export const BUDGET_SETTINGS: Record<BudgetKind, string> = {
  operations: 'KILN_TEMPLATE_EVAL_MAX_OPS',
  output: 'KILN_TEMPLATE_EVAL_MAX_OUTPUT_BYTES',
  depth: 'KILN_TEMPLATE_EVAL_MAX_DEPTH',
  time: 'KILN_TEMPLATE_EVAL_TIMEOUT_MS',
}

function describe(kind: BudgetKind, max: number): string {
  const setting = BUDGET_SETTINGS[kind]
  switch (kind) {
    case 'operations':
      return `template evaluation exceeded its budget of ${max} operations (${setting})`
    case 'output':
      return `template evaluation produced more than ${max} bytes (${setting})`
    case 'depth':
      return `the template nests deeper than ${max} levels (${setting})`
    case 'time':
      return `template evaluation took longer than ${max} ms (${setting})`
  }
}

export class BudgetExceeded extends Error {
  override name = 'BudgetExceeded'
  /** Where in the template the budget ran out (dotted path), when known. */
  path: string | null = null

  constructor(
    readonly budget: BudgetKind,
    readonly max: number,
    /**
     * Spent only the small inline allowance (Budget.inline), not the budget
     * itself: the caller may run the same evaluation again under the full
     * budget, off its thread.
     */
    readonly inline = false,
  ) {
    super(describe(budget, max))
  }

  /** Record the innermost place it happened (the first call wins). */
  at(path: string): this {
    if (this.path === null && path) {
      this.path = path
      this.message = `${describe(this.budget, this.max)} at ${path}`
    }
    return this
  }
}

export class Budget {
  ops = 0
  bytes = 0
  private readonly opLimit: number
  private readonly sizes = new WeakMap<object, number>()

  constructor(
    readonly limits: EvaluationLimits,
    /** A smaller operation allowance to try first (see `inline` on BudgetExceeded). */
    inlineOps?: number,
  ) {
    this.opLimit = inlineOps !== undefined ? Math.min(inlineOps, limits.maxOps) : limits.maxOps
  }

  /** Charge `n` operations. */
  op(n = 1): void {
    this.ops += n
    if (this.ops > this.opLimit) throw new BudgetExceeded('operations', this.opLimit === this.limits.maxOps ? this.limits.maxOps : this.opLimit, this.opLimit < this.limits.maxOps)
  }

  /** Operations left before the budget is spent (a function can refuse work it knows it cannot finish). */
  get opsLeft(): number {
    return this.opLimit - this.ops
  }

  /** Charge `n` bytes of output. */
  output(n: number): void {
    this.bytes += n
    if (this.bytes > this.limits.maxOutputBytes) throw new BudgetExceeded('output', this.limits.maxOutputBytes)
  }

  /** Charge a value's size as output (a function's result, a referenced value). */
  produced(v: unknown): void {
    this.output(this.measure(v))
  }

  /**
   * The approximate size of a value as JSON. Every node visited costs an
   * operation, but a list or map measured before (a shared parameter value,
   * a function result passed on) is looked up, so that charging a value each
   * time it is used costs one operation, not its size again.
   */
  measure(v: unknown, depth = 0): number {
    if (typeof v === 'string') return v.length + 2
    if (typeof v !== 'object' || v === null) return 8
    const known = this.sizes.get(v)
    if (known !== undefined) {
      this.op()
      return known
    }
    if (depth >= this.limits.maxDepth) throw new BudgetExceeded('depth', this.limits.maxDepth)
    let size = 2
    if (Array.isArray(v)) {
      this.op(1 + v.length)
      for (const x of v) size += 1 + this.measure(x, depth + 1)
    } else {
      const entries = Object.entries(v)
      this.op(1 + entries.length)
      for (const [k, x] of entries) size += k.length + 4 + this.measure(x, depth + 1)
    }
    this.sizes.set(v, size)
    return size
  }
}

/**
 * The first place where `root` nests deeper than `max` (lists and maps), or
 * null. Iterative: it runs before anything that recurses over the value.
 */
export function deeperThan(root: unknown, max: number): (string | number)[] | null {
  if (root === null || typeof root !== 'object') return null
  // Depth-first with one shared path: O(nodes), whatever the depth.
  const path: (string | number)[] = []
  const frames: { keys: (string | number)[]; values: unknown[]; i: number }[] = []
  const enter = (v: object) => {
    if (Array.isArray(v)) frames.push({ keys: v.map((_, i) => i), values: v, i: 0 })
    else frames.push({ keys: Object.keys(v), values: Object.values(v), i: 0 })
  }
  enter(root)
  while (frames.length) {
    const f = frames[frames.length - 1]!
    if (f.i === f.values.length) {
      frames.pop()
      path.pop()
      continue
    }
    const key = f.keys[f.i]!
    const child = f.values[f.i++]
    if (child === null || typeof child !== 'object') continue
    path.push(key)
    if (path.length >= max) return path
    enter(child)
  }
  return null
}

/** Count the nodes of a value (lists, maps and scalars), iteratively, stopping once past `stopAt`. */
export function countNodes(root: unknown, stopAt = Number.POSITIVE_INFINITY): number {
  let n = 0
  const todo: unknown[] = [root]
  while (todo.length && n <= stopAt) {
    const v = todo.pop()
    n++
    if (v === null || typeof v !== 'object') continue
    if (Array.isArray(v)) for (const x of v) todo.push(x)
    else for (const x of Object.values(v)) todo.push(x)
  }
  return n
}
