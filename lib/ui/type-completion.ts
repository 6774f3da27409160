/**
 * Completing resource type names in the template editor: after `type:` on a
 * line, the types the project may use (GET /api/resource-types: the built-in
 * ones, the type packages' and its providers'), filtered by what is typed.
 * Pure: the editor hands it the text before the cursor.
 */

export interface TypeOption {
  label: string
  detail?: string
  type: string
}

/** What to offer at the cursor: the completion's start and its options, or null when the cursor is not at a type. */
export function typeCompletions(lineBefore: string, lineStart: number, types: readonly { name: string; description: string }[]): { from: number; options: TypeOption[]; validFor: RegExp } | null {
  const m = /^(\s*(?:-\s+)?type:\s*["']?)([A-Za-z0-9:]*)$/.exec(lineBefore)
  if (!m) return null
  const typed = m[2]!.toLowerCase()
  const options = types
    .filter((t) => t.name.toLowerCase().includes(typed))
    .map((t) => ({ label: t.name, detail: t.description.length > 60 ? `${t.description.slice(0, 57)}…` : t.description, type: 'type' }))
  // Typing more of the name narrows the same list: no need to ask again.
  return { from: lineStart + m[1]!.length, options, validFor: /^[A-Za-z0-9:]*$/ }
}
