/**
 * A preview on an evaluation thread decides replacements with
 * lib/resources/replace-rules.ts; a worker's node run asks the type itself.
 * They must be the same functions, or a preview would promise an update that
 * the run turns into a replacement.
 */
import { expect, test } from 'vitest'
import { builtinTypes } from '../../lib/resources/registry'
import { builtinReplaceRules } from '../../lib/resources/replace-rules'

test('every built-in replace rule is the one the type itself runs, and no other', () => {
  const ofTypes = new Map(builtinTypes().flatMap((t) => (t.replaceOnUpdate ? [[t.name, t.replaceOnUpdate] as const] : [])))
  expect([...builtinReplaceRules.keys()].sort()).toEqual([...ofTypes.keys()].sort())
  for (const [name, rule] of ofTypes) expect(builtinReplaceRules.get(name), name).toBe(rule)
})
