/**
 * Secrecy follows a value through evaluation.
 *
 * A value is secret when it is a hidden parameter's, an attribute's that its
 * type declares `secret` (read with get_attr), or the result of a function
 * whose arguments were evaluated from a secret. Secrets are masked by value:
 * every textual form a secret can take (the string, a number's digits, a
 * list's or map's JSON and its items) is a *form*, and `redact` masks the
 * forms wherever they stand, whole or inside other text.
 *
 * An evaluation carries a Secrecy. It counts every read of a secret (a mark
 * taken before a function's arguments are evaluated and compared after says
 * whether they hold one), and learns the forms of what a function makes from
 * a secret: a `str_split`'s pieces, a `str_replace`'s or `list_join`'s text, a
 * `repeat`'s substituted strings, a `digest` (a digest of a password can be
 * guessed offline, so it is kept secret too). Functions that pass values on
 * unchanged (list_concat, map_merge, filter) make nothing new: what they pass
 * is a form already. A condition's outcome is a boolean, which is never
 * masked, so conditions do not count as reads.
 *
 * A resource row stores the forms its properties carry (storedForms); a form
 * longer than LONGEST_KEPT_FORM (a file's content made from a secret) is
 * stored as its SHA-256 and masked where it stands whole, so the row does not
 * hold a second copy of it and reads do not load one.
 */
import { createHash } from 'node:crypto'
import { BudgetExceeded, type Budget } from './budget'

export const MASK = '******'

/**
 * Values shorter than this are masked only where they stand alone (a whole string or number):
 * masking every "a" or "1" inside other text would garble everything and protect nothing.
 */
export const MIN_EMBEDDED = 4

/** Add every textual form of `v` to `into`; `list`: a comma_delimited_list's text, whose items are forms too. */
export function addForms(v: unknown, list: boolean, into: Set<string>, budget?: Budget): void {
  budget?.op()
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
    if (budget) budget.op(1 + (budget.measure(v) >> 6))
    into.add(JSON.stringify(v))
    for (const x of Array.isArray(v) ? v : Object.values(v)) addForms(x, false, into, budget)
  }
}

/** Forms longer than this are stored as their SHA-256, and masked where they stand whole. */
export const LONGEST_KEPT_FORM = 512
const DIGEST_ENTRY = /^#sha256:([0-9a-f]{64})$/
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex')

/** The forms as a row stores them: a long one as `#sha256:<hex>`. */
export function storedForms(forms: Iterable<string>): string[] {
  return [...new Set([...forms].map((f) => (f.length > LONGEST_KEPT_FORM ? `#sha256:${sha256(f)}` : f)))]
}

/** What to mask: forms as text, longest first (so a value containing another is masked whole), and digests of long forms. */
export class Secrets {
  readonly texts: readonly string[]
  readonly digests: ReadonlySet<string>

  constructor(forms: Iterable<string>) {
    const texts = new Set<string>()
    const digests = new Set<string>()
    for (const f of forms) {
      texts.add(f) // a digest entry is also text: a short form could have that shape
      const m = DIGEST_ENTRY.exec(f)
      if (m) digests.add(m[1]!)
    }
    this.texts = [...texts].sort((a, b) => b.length - a.length)
    this.digests = digests
  }

  get empty(): boolean {
    return this.texts.length === 0
  }

  /** Whether a long text is, whole, a form stored as its digest. */
  digested(text: string): boolean {
    return this.digests.size > 0 && text.length > LONGEST_KEPT_FORM && this.digests.has(sha256(text))
  }
}

export const secretList = (forms: Iterable<string>): Secrets => new Secrets(forms)

type SecretsLike = Secrets | readonly string[]
const secretsOf = (s: SecretsLike): Secrets => (s instanceof Secrets ? s : new Secrets(s))

function maskText(text: string, s: Secrets): string {
  if (s.digested(text)) return MASK
  for (const f of s.texts) {
    if (text === f) return MASK
    if (f.length >= MIN_EMBEDDED && text.includes(f)) text = text.split(f).join(MASK)
  }
  return text
}

/** Mask every secret form in a string: the whole string, or inside it. */
export function redactText(text: string, secrets: SecretsLike): string {
  return maskText(text, secretsOf(secrets))
}

/** Mask secret forms anywhere in a JSON value: inside strings and keys, and numbers equal to one. */
export function redact<T>(value: T, secrets: SecretsLike): T {
  const s = secretsOf(secrets)
  if (s.empty) return value
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return maskText(v, s)
    if (typeof v === 'number') return s.texts.includes(String(v)) ? MASK : v
    if (Array.isArray(v)) return v.map(walk)
    if (v && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) return Object.fromEntries(Object.entries(v).map(([k, x]) => [maskText(k, s), walk(x)]))
    return v
  }
  return walk(value) as T
}

const textHolds = (text: string, s: Secrets) => s.digested(text) || s.texts.some((f) => text === f || (f.length >= MIN_EMBEDDED && text.includes(f)))

/** Whether `redact` would mask anything in `value`; `budget`, when given, is charged for the search. */
export function holdsSecret(value: unknown, secrets: SecretsLike, budget?: Budget): boolean {
  const s = secretsOf(secrets)
  if (s.empty) return false
  const walk = (v: unknown): boolean => {
    if (typeof v === 'string') {
      budget?.op(1 + (((s.texts.length + 1) * (v.length + 64)) >> 6))
      return textHolds(v, s)
    }
    budget?.op()
    if (typeof v === 'number') return s.texts.includes(String(v))
    if (Array.isArray(v)) return v.some(walk)
    if (v && typeof v === 'object') return Object.entries(v).some(([k, x]) => textHolds(k, s) || walk(x))
    return false
  }
  return walk(value)
}

/** Functions whose result only passes on (or tests) values of their arguments: they make no new text. */
const PASSING_ON = new Set(['list_concat', 'list_concat_unique', 'filter', 'map_merge', 'contains'])

export class Secrecy {
  private reads = 0
  private readonly known: ReadonlyArray<ReadonlySet<string>>
  /** Forms this evaluation learned (beyond those it was given). */
  readonly learned = new Set<string>()
  /** Lists and maps whose forms were learned already (a shared parameter value read many times). */
  private readonly learnedObjects = new WeakSet<object>()

  constructor(
    private readonly budget: Budget,
    /** Forms known before the evaluation: hidden parameters', those the definition's static phase derived. */
    ...known: ReadonlyArray<ReadonlySet<string> | readonly string[]>
  ) {
    this.known = known.map((k) => (k instanceof Set ? k : new Set(k)))
  }

  /** The count of secret reads so far: `since(mark)` says whether something evaluated after the mark read one. */
  mark(): number {
    return this.reads
  }

  since(mark: number): boolean {
    return this.reads > mark
  }

  /** Something secret was read (its forms are known already). */
  touch(): void {
    this.reads++
  }

  /** A secret was read: `v` and every form of it are secret. */
  read(v: unknown): void {
    this.reads++
    this.learn(v)
  }

  /** Evaluate `fn` without counting its reads (a condition: its outcome is a boolean, never masked). */
  untracked<T>(fn: () => T): T {
    const before = this.reads
    try {
      return fn()
    } finally {
      this.reads = before
    }
  }

  /** Whether a string or number is (exactly) a known secret form. */
  isForm(v: unknown): boolean {
    if (typeof v !== 'string' && typeof v !== 'number') return false
    const s = String(v)
    return this.learned.has(s) || this.known.some((k) => k.has(s))
  }

  /** Every form of `v` not known already is learned. */
  learn(v: unknown): void {
    if (typeof v === 'object' && v !== null) {
      if (this.learnedObjects.has(v)) return
      this.learnedObjects.add(v)
    }
    const forms = new Set<string>()
    addForms(v, false, forms, this.budget)
    for (const f of forms) if (!this.known.some((k) => k.has(f))) this.learned.add(f)
  }

  /** `fn` computed `result` from `args`, which hold a secret: learn what of the result is secret. */
  derive(fn: string, args: unknown, result: unknown): void {
    if (PASSING_ON.has(fn)) return
    if (fn === 'repeat') return this.deriveRepeat(args, result)
    if (fn === 'map_replace') return this.deriveMapReplace(args, result)
    // str_replace*, list_join, str_split, digest, make_url: text made from the secret.
    this.learn(result)
  }

  /**
   * A repeat over a secret list: the strings and keys it made by substitution (those not already
   * in its template) are secret. A repeat whose lists hold no secret only copies its template,
   * whose secret strings are forms already.
   */
  private deriveRepeat(args: unknown, result: unknown): void {
    const a = args as { for_each: Record<string, unknown[]>; template: unknown }
    const secretVar = Object.values(a.for_each).some((list) => list.some((x) => this.isForm(typeof x === 'object' && x !== null ? JSON.stringify(x) : x)))
    if (!secretVar) return
    const written = new Set<string>()
    walkStrings(a.template, (s) => written.add(s), this.budget)
    walkStrings(result, (s) => {
      if (!written.has(s)) this.learned.add(s)
    }, this.budget)
  }

  /** A map_replace: a key renamed from a secret key, and a value replaced for a secret value, are secret. */
  private deriveMapReplace(args: unknown, result: unknown): void {
    const [m, spec] = args as [Record<string, unknown>, { keys?: Record<string, unknown>; values?: Record<string, unknown> }]
    const keys = spec.keys ?? {}
    const values = spec.values ?? {}
    for (const [k, v] of Object.entries(m)) {
      this.budget.op()
      if (Object.hasOwn(keys, k) && this.isForm(k)) this.learn(keys[k])
      const sv = typeof v === 'string' || typeof v === 'number' ? String(v) : null
      if (sv !== null && Object.hasOwn(values, sv) && this.isForm(sv)) this.learn(values[sv])
    }
    void result
  }

  /** The secret forms a value carries as its own strings, numbers and keys (what a resource row stores with its properties, as storedForms). */
  carried(v: unknown): string[] {
    if (!this.learned.size && this.known.every((k) => !k.size)) return []
    const out = new Set<string>()
    const walk = (x: unknown, depth: number): void => {
      this.budget.op()
      if (depth > this.budget.limits.maxDepth) throw new BudgetExceeded('depth', this.budget.limits.maxDepth)
      if (typeof x === 'string' || typeof x === 'number') {
        if (this.isForm(x)) out.add(String(x))
      } else if (Array.isArray(x)) for (const y of x) walk(y, depth + 1)
      else if (x && typeof x === 'object') {
        for (const [k, y] of Object.entries(x)) {
          if (this.isForm(k)) out.add(k)
          walk(y, depth + 1)
        }
      }
    }
    walk(v, 0)
    return [...out]
  }
}

/** Every string and key of a value, charged one operation each. */
function walkStrings(v: unknown, fn: (s: string) => void, budget: Budget): void {
  budget.op()
  if (typeof v === 'string') fn(v)
  else if (Array.isArray(v)) for (const x of v) walkStrings(x, fn, budget)
  else if (v && typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) {
      fn(k)
      walkStrings(x, fn, budget)
    }
  }
}
