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

/** Kiln::Exec: properties that only say how the object is managed; changing them alone runs no command. */
export const EXEC_MANAGEMENT_PROPERTIES = ['update', 'delete', 'observe', 'timeout']

/** Kiln::Exec: a change of what the commands are given, with no update command, replaces the resource. */
export function execReplaceReason(props: Record<string, unknown>, _prev: unknown, changed: string[]): string | null {
  const needsCommand = changed.length === 0 || changed.some((k) => !EXEC_MANAGEMENT_PROPERTIES.includes(k))
  return needsCommand && !props.update ? 'Kiln::Exec has no update command: a change of input or environment replaces it' : null
}

export const builtinReplaceRules: ReadonlyMap<string, ReplaceRule> = new Map<string, ReplaceRule>([
  ['OS::Heat::TestResource', testResourceReplaceReason],
  ['Kiln::Exec', execReplaceReason],
])
