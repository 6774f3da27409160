/**
 * The replace rules (ResourceType.replaceOnUpdate) of the built-in types, by
 * type name. A rule is a pure function of the properties, kept here rather
 * than in the type's module (which does I/O) so that an evaluation thread can
 * decide a preview's replacements with the very function a worker's node run
 * calls, without loading the types' I/O.
 */
import type { ResourceType } from './types'

export type ReplaceRule = NonNullable<ResourceType['replaceOnUpdate']>

/** OS::Heat::TestResource: `update_replace` turns every update into a replacement. */
export function testResourceReplaceReason(props: Record<string, unknown>): string | null {
  return props.update_replace === true ? 'update_replace is set' : null
}

export const builtinReplaceRules: ReadonlyMap<string, ReplaceRule> = new Map([['OS::Heat::TestResource', testResourceReplaceReason]])
