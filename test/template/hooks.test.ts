/** Hooks in an environment (lib/template/hooks.ts): what is read, what is refused, and Python's fnmatchcase. */
import { describe, expect, test } from 'vitest'
import { parseEnvironment } from '../../lib/template/environment'
import { globMatch, hooksOf } from '../../lib/template/hooks'

describe('globMatch (fnmatchcase)', () => {
  test.each([
    ['db', 'db', true],
    ['db', 'db2', false],
    ['web_*', 'web_1', true],
    ['web_*', 'web_', true],
    ['web_*', 'xweb_1', false],
    ['*_server', 'a_server', true],
    ['*', '', true],
    ['?b', 'ab', true],
    ['?b', 'b', false],
    ['[ab]x', 'bx', true],
    ['[!ab]x', 'bx', false],
    ['[!ab]x', 'cx', true],
    ['[a-c]9', 'b9', true],
    ['[a-c]9', 'd9', false],
    ['[]]', ']', true],
    ['[x', '[x', true],
    ['a*b*c', 'axxbyyc', true],
    ['a*b*c', 'axxbyy', false],
    ['DB', 'db', false],
  ])('%s matches %s: %s', (pattern, name, expected) => {
    expect(globMatch(pattern, name)).toBe(expected)
  })

  test('a pattern of many stars against a long name answers at once (no backtracking blow-up)', () => {
    const t0 = performance.now()
    expect(globMatch('*a'.repeat(30) + 'b', 'a'.repeat(5000))).toBe(false)
    expect(performance.now() - t0).toBeLessThan(5000)
  })
})

describe('hooks in resource_registry.resources', () => {
  test('a string or a list, by name or pattern, merged per resource', () => {
    const env = parseEnvironment({ resource_registry: { 'My::T': 'OS::Heat::None', resources: { db: { hooks: 'pre-create' }, 'd*': { hooks: ['pre-update', 'pre-create'] } } } })
    expect(env.resourceRegistry).toEqual({ 'My::T': 'OS::Heat::None' })
    expect(hooksOf(env.hooks, 'db').sort()).toEqual(['pre-create', 'pre-update'])
    expect(hooksOf(env.hooks, 'dx')).toEqual(['pre-update', 'pre-create'])
    expect(hooksOf(env.hooks, 'web')).toEqual([])
  })

  test.each([
    [{ b: { hooks: 'post-update' } }, 'environment.resource_registry.resources.b.hooks', 'the post-update hook is not supported'],
    [{ b: { hooks: ['pre-create', 'nope'] } }, 'environment.resource_registry.resources.b.hooks.1', '"nope" is not a hook'],
    [{ b: { hooks: 3 } }, 'environment.resource_registry.resources.b.hooks', 'hooks must be one of'],
    [{ b: 'pre-create' }, 'environment.resource_registry.resources.b', 'must be a map'],
    [{ n: { m: { hooks: 'pre-create' } } }, 'environment.resource_registry.resources.n.m', 'nested stacks'],
  ])('%j is refused at its place', (resources, place, text) => {
    let err: unknown
    try {
      parseEnvironment({ resource_registry: { resources } })
    } catch (e) {
      err = e
    }
    expect(String((err as Error)?.message)).toContain(text)
    expect(JSON.stringify(err)).toContain(place)
  })
})
