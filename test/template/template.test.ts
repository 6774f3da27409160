/**
 * The HOT template module: structure, parameters, conditions, functions,
 * dependencies, cycles and environments, with exact paths, lines and columns.
 */
import { describe, expect, test } from 'vitest'
import { buildDefinition, parseEnvironment, parseTemplate, resolveOutputs, resolveProperties, TemplateError, UNKNOWN } from '../../lib/template'
import type { TemplateIssue } from '../../lib/template'
import { builtinTypes, createRegistry, typeCatalog } from '../../lib/resources/registry'

const types = typeCatalog(createRegistry(builtinTypes()))

function issues(fn: () => unknown): TemplateIssue[] {
  try {
    fn()
  } catch (err) {
    if (err instanceof TemplateError) return err.issues
    throw err
  }
  throw new Error('expected a TemplateError')
}
const build = (src: string, params: Record<string, unknown> = {}, env?: string) => buildDefinition(parseTemplate(src), { parameters: params, types, ...(env ? { environment: parseEnvironment(env) } : {}) })

describe('parse', () => {
  test('unknown sections and resource keys are reported at their line and column', () => {
    const found = issues(() => parseTemplate('heat_template_version: 2018-08-31\nresource:\n  a: {}\nresources:\n  b:\n    type: OS::Heat::None\n    propertes: {}\n'))
    expect(found.map((i) => [i.path, i.line, i.column])).toEqual([
      ['resource', 2, 1],
      ['resources.b.propertes', 7, 5],
    ])
  })

  test('versions: dates and release names; unknown versions listed', () => {
    expect(parseTemplate('heat_template_version: wallaby\n').version).toBe('2021-04-16')
    expect(parseTemplate('{"heat_template_version": "2013-05-23", "resources": {}}').version).toBe('2013-05-23')
    const [bad] = issues(() => parseTemplate('heat_template_version: 2019-01-01\n'))
    expect(bad).toMatchObject({ code: 'version', path: 'heat_template_version', line: 1 })
    expect(issues(() => parseTemplate('resources: {}\n'))[0]!.message).toContain('missing')
  })

  test('syntax errors and duplicate keys name the line', () => {
    const [dup] = issues(() => parseTemplate('heat_template_version: 2018-08-31\nresources:\n  a: {type: OS::Heat::None}\n  a: {type: OS::Heat::None}\n'))
    expect(dup).toMatchObject({ code: 'syntax', line: 4 })
    expect(issues(() => parseTemplate('a: [1, 2\n'))[0]!.code).toBe('syntax')
  })

  test('JSON text is read as JSON (as Heat does), and its problems still name their line and column', () => {
    const json = '{\n  "heat_template_version": "2018-08-31",\n  "resources": {\n    "a": {"type": "OS::Heat::None", "propertes": {}},\n    "b": {"type": "OS::Heat::None", "depends_on": "a"}\n  }\n}'
    const [bad] = issues(() => parseTemplate(json))
    expect(bad).toMatchObject({ path: 'resources.a.propertes', line: 4, column: 37 })
    // A key given twice keeps its last value (json.loads in Heat), and JSON-only escapes work.
    const t = parseTemplate('{"heat_template_version": "2013-05-23", "description": "a\\/b", "resources": {"x": {"type": "OS::Heat::None"}, "x": {"type": "OS::Heat::RandomString"}}}')
    expect(t.description).toBe('a/b')
    expect(t.resources.x!.type).toBe('OS::Heat::RandomString')
    // Not JSON (a YAML flow map): the YAML reader takes it.
    expect(parseTemplate('{heat_template_version: 2018-08-31, resources: {}}').version).toBe('2018-08-31')
  })

  test('PyYAML booleans: yes/no/on/off are booleans, y and n are strings', () => {
    const t = parseTemplate('heat_template_version: 2018-08-31\nparameters:\n  n: {type: string, default: y}\n  f: {type: boolean, default: off}\n')
    expect(t.parameters.n!.default).toBe('y')
    expect(t.parameters.f!.default).toBe(false)
  })
})

describe('parameters', () => {
  const src = `heat_template_version: 2018-08-31
parameters:
  size:
    type: number
    constraints:
      - range: { min: 1, max: 10 }
  name:
    type: string
    default: web
    constraints:
      - allowed_pattern: "[a-z]+"
      - length: { max: 5 }
  zones: { type: comma_delimited_list, default: "a,b" }
  conf: { type: json, default: { k: 1 } }
  enabled: { type: boolean, default: "true" }
  pw: { type: string, hidden: true }
resources: {}
`
  test('values are converted and constrained; each problem at its parameter', () => {
    const def = build(src, { size: '3', pw: 'x' })
    expect(def.parameters).toMatchObject({ size: 3, name: 'web', zones: ['a', 'b'], conf: { k: 1 }, enabled: true, pw: 'x' })
    expect(def.hiddenParameters).toEqual(['pw'])
    const found = issues(() => build(src, { size: 11, name: 'Toolong', nope: 1 }))
    expect(found.map((i) => i.path).sort()).toEqual(['parameters.name', 'parameters.nope', 'parameters.pw', 'parameters.size'])
    expect(found.find((i) => i.path === 'parameters.size')!).toMatchObject({ code: 'constraint', line: 3, column: 3 })
  })

  test('precedence: request > environment parameters > parameter_defaults > template default', () => {
    const t = 'heat_template_version: 2018-08-31\nparameters:\n  a: {type: string, default: t}\n  b: {type: string, default: t}\n  c: {type: string, default: t}\nresources: {}\n'
    const env = 'parameters:\n  a: env\n  b: env\nparameter_defaults:\n  c: def\n'
    expect(build(t, { a: 'req' }, env).parameters).toMatchObject({ a: 'req', b: 'env', c: 'def' })
  })
})

describe('resources, functions and dependencies', () => {
  test('dependencies come from get_resource, get_attr and depends_on; values resolve at run time', () => {
    const def = build(`heat_template_version: 2018-08-31
parameters:
  prefix: { type: string, default: app }
resources:
  a: { type: OS::Heat::Value, properties: { value: { list_join: ['-', [{ get_param: prefix }, x]] } } }
  b:
    type: OS::Heat::Value
    properties:
      value: { str_replace: { template: "id=ID v=V", params: { ID: { get_resource: a }, V: { get_attr: [a, value, 0] } } } }
  c: { type: OS::Heat::None, depends_on: [b, a] }
outputs:
  o: { value: { get_attr: [b, value] } }
`)
    expect(def.resources.a!.properties).toEqual({ value: 'app-x' })
    expect(def.resources.b!.dependsOn).toEqual(['a'])
    expect(def.resources.c!.dependsOn).toEqual(['a', 'b'])
    const ctx = { getResource: (n: string) => `${n}-phys`, getAttr: (n: string) => (n === 'a' ? ['first', 'second'] : 'bv') }
    expect(resolveProperties(def, 'b', ctx)).toEqual({ value: 'id=a-phys v=first' })
    expect(resolveOutputs(def, ctx).o!.value).toBe('bv')
    expect(resolveProperties(def, 'b', { getResource: () => UNKNOWN, getAttr: () => UNKNOWN })).toEqual({ value: UNKNOWN })
  })

  test('conditions: resources and outputs switched off; if; a loop between conditions is an error', () => {
    const src = `heat_template_version: 2018-08-31
parameters:
  env: { type: string, default: prod }
conditions:
  is_prod: { equals: [{ get_param: env }, prod] }
  not_prod: { not: is_prod }
resources:
  big: { type: OS::Heat::None, condition: is_prod }
  small: { type: OS::Heat::None, condition: not_prod }
  v: { type: OS::Heat::Value, properties: { value: { if: [is_prod, 10, 1] } }, depends_on: [small] }
`
    const prod = build(src)
    expect(Object.keys(prod.resources).sort()).toEqual(['big', 'v'])
    expect(prod.resources.v!.properties.value).toBe(10)
    expect(prod.resources.v!.dependsOn).toEqual([])
    expect(Object.keys(build(src, { env: 'dev' }).resources).sort()).toEqual(['small', 'v'])
    const loop = issues(() => build('heat_template_version: 2018-08-31\nconditions:\n  a: { not: b }\n  b: { not: a }\nresources: {}\n'))
    expect(loop[0]).toMatchObject({ code: 'cycle' })
  })

  test('references, types, properties and attributes are checked with their positions', () => {
    const found = issues(() =>
      build(`heat_template_version: 2018-08-31
resources:
  a:
    type: OS::Heat::TestResource
    properties:
      wait_secs: soon
      value: { get_attr: [b, nope] }
  b: { type: OS::Heat::Value, properties: { value: 1 } }
  c: { type: No::Such::Type }
  d: { type: OS::Heat::None, depends_on: [ghost] }
  e: { type: OS::Heat::Value, properties: { value: { get_resource: ghost } } }
`),
    )
    const at = (path: string) => found.find((i) => i.path.startsWith(path))
    expect(at('resources.a.properties.wait_secs')).toMatchObject({ code: 'property', line: 6, column: 7 })
    expect(at('resources.a.properties.value')).toMatchObject({ code: 'reference' })
    expect(at('resources.c.type')).toMatchObject({ code: 'type', line: 9 })
    expect(at('resources.d.depends_on')).toMatchObject({ code: 'reference', line: 10 })
    expect(at('resources.e.properties.value')).toMatchObject({ code: 'reference' })
  })

  test('every cycle is listed, deterministically', () => {
    const [c] = issues(() =>
      build(`heat_template_version: 2018-08-31
resources:
  a: { type: OS::Heat::None, depends_on: [b] }
  b: { type: OS::Heat::None, depends_on: [a] }
  x: { type: OS::Heat::None, depends_on: [y] }
  y: { type: OS::Heat::None, depends_on: [z] }
  z: { type: OS::Heat::None, depends_on: [x] }
  self: { type: OS::Heat::None, depends_on: [self] }
  ok: { type: OS::Heat::None }
`),
    )
    expect(c!.code).toBe('cycle')
    expect(c!.cycles).toEqual([['a', 'b'], ['self'], ['x', 'y', 'z']])
  })

  test('a function newer than the template version is an error; CloudFormation functions are refused', () => {
    const [old] = issues(() => build('heat_template_version: 2013-05-23\nresources:\n  v: { type: OS::Heat::Value, properties: { value: { str_split: [",", "a,b"] } } }\n'))
    expect(old).toMatchObject({ code: 'function', path: 'resources.v.properties.value.str_split' })
    expect(issues(() => build('heat_template_version: 2018-08-31\nresources:\n  v: { type: OS::Heat::Value, properties: { value: { "Fn::GetAtt": [a, b] } } }\n'))[0]!.message).toContain('not supported')
  })

  test('environment: registry aliases and the resource limit', () => {
    const def = build('heat_template_version: 2018-08-31\nresources:\n  s: { type: My::Server, properties: { anything: 1 } }\n', {}, 'resource_registry:\n  My::Server: OS::Heat::None\n')
    expect(def.resources.s!.type).toBe('OS::Heat::None')
    const [bad] = issues(() => parseEnvironment('resource_registry:\n  My::Server: server.yaml\n'))
    expect(bad!.path).toBe('environment.resource_registry.My::Server')
    const many = `heat_template_version: 2018-08-31\nresources:\n${[1, 2, 3].map((i) => `  r${i}: { type: OS::Heat::None }`).join('\n')}\n`
    expect(issues(() => buildDefinition(parseTemplate(many), { maxResources: 2 }))[0]!.code).toBe('limit')
  })
})
