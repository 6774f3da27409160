/** The editor's completion of resource type names (lib/ui/type-completion.ts), without a browser. */
import { expect, test } from 'vitest'
import { typeCompletions } from '../../lib/ui/type-completion'

const types = [
  { name: 'Kiln::File', description: 'A file in the project’s workspace.' },
  { name: 'OS::Heat::TestResource', description: 'A resource that waits, fails or asks to be replaced on demand, for testing stacks.' },
  { name: 'Acme::Bucket', description: 'A bucket.' },
]

test('after `type:`, the types whose name holds what is typed, from where the name starts', () => {
  expect(typeCompletions('    type: ', 100, types)?.options.map((o) => o.label)).toEqual(['Kiln::File', 'OS::Heat::TestResource', 'Acme::Bucket'])
  const r = typeCompletions('    type: kiln::f', 100, types)!
  expect(r.from).toBe(110)
  expect(r.options.map((o) => o.label)).toEqual(['Kiln::File'])
  expect(typeCompletions('  - type: "Ac', 0, types)!.options.map((o) => o.label)).toEqual(['Acme::Bucket'])
  // Long descriptions are cut for the list.
  expect(typeCompletions('type: Test', 0, types)!.options[0]!.detail).toMatch(/…$/)
})

test('nothing anywhere else: a property value, a name, another key', () => {
  expect(typeCompletions('    properties: ', 0, types)).toBeNull()
  expect(typeCompletions('  type_name: K', 0, types)).toBeNull()
  expect(typeCompletions('    value: type: K', 0, types)).toBeNull()
})
