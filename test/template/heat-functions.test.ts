/**
 * Template functions exactly as Heat: each row is a snippet, a
 * heat_template_version and what Heat answers for it, taken from Heat's own
 * unit tests (heat/tests/test_hot.py, named in each row) or, where a row
 * says so, from the function's code (heat/engine/hot/functions.py) and the
 * functions each HOT version registers (heat/engine/hot/template.py).
 *
 * A snippet is evaluated as an output's value of a template with one
 * resource, `resource1` (OS::Heat::None), whose attributes are those of
 * Heat's GenericResourceType in its tests (`foo`, `Foo`, and `show`).
 * Where Heat refuses, Kiln answers a validation error naming the place.
 */
import { describe, expect, test } from 'vitest'
import { valuesContext } from '../../lib/evaluation/tasks'
import { buildDefinition, knownSecrets, parseTemplate, redact, resolveOutputs, resolveProperties, resolveSecretAware, TemplateError, type ResolveContext, type TemplateIssue } from '../../lib/template'
import { builtinTypes, createRegistry, typeCatalog } from '../../lib/resources/registry'

const types = typeCatalog(createRegistry(builtinTypes()))

const ATTRIBUTES = { foo: 'resource1', Foo: 'resource1', show: { id: 'resource1-id' } }
const ctx: ResolveContext = {
  getResource: () => 'resource1-id',
  getAttr: (_, a) => (ATTRIBUTES as Record<string, unknown>)[a] ?? null,
  getAttrs: () => ATTRIBUTES,
}

interface Row {
  /** The Heat unit test (or code) the expected answer comes from. */
  heat: string
  version: string
  snippet: unknown
  conditions?: Record<string, unknown>
  parameters?: Record<string, unknown>
  params?: Record<string, unknown>
  /** The value Heat gives, or the error it raises (a pattern of Kiln's message) and where. */
  value?: unknown
  error?: RegExp
  path?: string
}

type Outcome = { value: unknown } | { issues: TemplateIssue[] } | { runtime: string }

function evaluate(row: Row): Outcome {
  const template = {
    heat_template_version: row.version,
    ...(row.parameters ? { parameters: row.parameters } : {}),
    ...(row.conditions ? { conditions: row.conditions } : {}),
    resources: { resource1: { type: 'OS::Heat::None' } },
    outputs: { out: { value: row.snippet } },
  }
  try {
    const def = buildDefinition(parseTemplate(JSON.stringify(template, null, 2)), { parameters: row.params ?? {}, types })
    const out = resolveOutputs(def, ctx).out!
    return out.error !== undefined ? { runtime: out.error } : { value: out.value }
  } catch (err) {
    if (err instanceof TemplateError) return { issues: err.issues }
    throw err
  }
}

function check(row: Row): void {
  const got = evaluate(row)
  if (row.error) {
    if ('value' in got) throw new Error(`expected an error matching ${String(row.error)}, got the value ${JSON.stringify(got.value)}`)
    if ('runtime' in got) return void expect(got.runtime).toMatch(row.error)
    const issue = got.issues.find((i) => row.error!.test(i.message))
    expect(issue, got.issues.map((i) => `${i.path}: ${i.message}`).join('; ')).toBeDefined()
    // Named at its place, with the line and column of the text.
    expect(issue!.path.startsWith(row.path ?? 'outputs.out.value')).toBe(true)
    expect(issue!.line).not.toBeNull()
    return
  }
  expect(got).toEqual({ value: row.value })
}

const versionGates: Row[] = [
  // template.py: map_merge is registered from HOTemplate20160408 on.
  { heat: 'HOTemplate20160408.functions', version: '2015-10-15', snippet: { map_merge: [{ a: 1 }] }, error: /map_merge is not available in heat_template_version 2015-10-15; it needs 2016-04-08/, path: 'outputs.out.value.map_merge' },
  { heat: 'test_merge', version: '2016-04-08', snippet: { map_merge: [{ f1: 'b1', f2: 'b2' }, { f1: 'b2' }] }, value: { f1: 'b2', f2: 'b2' } },
  { heat: 'test_merge_none', version: '2016-04-08', snippet: { map_merge: [{ f1: 'b1', f2: 'b2' }, null] }, value: { f1: 'b1', f2: 'b2' } },
  { heat: 'test_merge_invalid', version: '2016-04-08', snippet: { map_merge: [{ f1: 'b1', f2: 'b2' }, ['f1', 'b2']] }, error: /map_merge takes a list of maps/ },
  // template.py: map_replace is registered from HOTemplate20161014 on.
  { heat: 'HOTemplate20161014.functions', version: '2016-04-08', snippet: { map_replace: [{ a: 1 }, { keys: {} }] }, error: /map_replace is not available in heat_template_version 2016-04-08; it needs 2016-10-14/, path: 'outputs.out.value.map_replace' },
  { heat: 'test_map_replace', version: '2016-10-14', snippet: { map_replace: [{ f1: 'b1', f2: 'b2' }, { keys: { f1: 'F1' }, values: { b2: 'B2' } }] }, value: { F1: 'b1', f2: 'B2' } },
  { heat: 'test_map_replace_keys_collide', version: '2016-10-14', snippet: { map_replace: [{ f1: 'b1', f2: 'b2' }, { keys: { f2: 'f1' } }] }, error: /f1/ },
  // template.py: str_replace_vstrict is registered from HOTemplate20170901 on.
  { heat: 'HOTemplate20170901.functions', version: '2017-02-24', snippet: { str_replace_vstrict: { template: 'a', params: { a: 'b' } } }, error: /str_replace_vstrict is not available in heat_template_version 2017-02-24; it needs 2017-09-01/ },
  {
    heat: 'test_str_replace_strict_missing_param (vstrict)',
    version: '2017-09-01',
    snippet: { str_replace_vstrict: { template: 'Template var1 string var2', params: { var1: 'foo', var2: 'bar', var0: 'zed', var: 'z', longvarname: 'q' } } },
    error: /^The following params were not found in the template: longvarname,var0,var$/,
  },
  ...[null, '', {}, []].map(
    (empty): Row => ({
      heat: 'test_str_replace_vstrict_empty_param_not_ok',
      version: '2017-09-01',
      snippet: { str_replace_vstrict: { template: 'Template var1 string var2', params: { var1: 'foo', var2: empty } } },
      error: /str_replace_vstrict has an undefined or empty value for param var2/,
    }),
  ),
]

const strReplace: Row[] = [
  { heat: 'test_str_replace', version: '2013-05-23', snippet: { str_replace: { template: 'Template var1 string var2', params: { var1: 'foo', var2: 'bar' } } }, value: 'Template foo string bar' },
  { heat: 'test_str_replace_map_param', version: '2013-05-23', snippet: { str_replace: { template: 'jsonvar1', params: { jsonvar1: { foo: 123 } } } }, error: /"str_replace" params must be strings or numbers, param jsonvar1 is not valid/ },
  { heat: 'test_liberty_str_replace_map_param', version: '2015-10-15', snippet: { str_replace: { template: 'jsonvar1', params: { jsonvar1: { foo: 123 } } } }, value: '{"foo": 123}' },
  { heat: 'test_str_replace_list_param', version: '2013-05-23', snippet: { str_replace: { template: 'listvar1', params: { listvar1: ['foo', 123] } } }, error: /"str_replace" params must be strings or numbers, param listvar1 is not valid/ },
  { heat: 'test_liberty_str_replace_list_param', version: '2015-10-15', snippet: { str_replace: { template: 'listvar1', params: { listvar1: ['foo', 123] } } }, value: '["foo", 123]' },
  // functions.py ReplaceJson._validate_replacement: jsonutils.dumps(value, sort_keys=True), non-ASCII escaped.
  { heat: 'ReplaceJson._validate_replacement', version: '2018-08-31', snippet: { str_replace: { template: 'v', params: { v: { b: 1.5, a: [true, null, 'é'] } } } }, value: '{"a": [true, null, "\\u00e9"], "b": 1.5}' },
  // functions.py Replace._validate_replacement: str(value) of a bool is Python's True / False.
  { heat: 'Replace._validate_replacement', version: '2013-05-23', snippet: { str_replace: { template: 'a=A b=B', params: { A: true, B: false } } }, value: 'a=True b=False' },
  { heat: 'ReplaceJson._validate_replacement', version: '2021-04-16', snippet: { str_replace: { template: 'a=A', params: { A: true } } }, value: 'a=True' },
  { heat: 'test_str_replace_number', version: '2013-05-23', snippet: { str_replace: { template: 'Template number string bar', params: { number: 1 } } }, value: 'Template 1 string bar' },
  { heat: 'test_str_replace_order', version: '2013-05-23', snippet: { str_replace: { template: '1234567890', params: { '1': 'a', '12': 'b', '123': 'c', '1234': 'd', '12345': 'e', '123456': 'f', '1234567': 'g' } } }, value: 'g890' },
  {
    heat: 'test_str_replace_single_pass',
    version: '2013-05-23',
    snippet: { str_replace: { template: '1234567890', params: { '1': 'a', '4': 'd', '8': 'h', '9': 'i', '123': '1', '456': '4', '890': '8', '90': '9' } } },
    value: '1478',
  },
  { heat: 'test_str_replace_sort_order', version: '2013-05-23', snippet: { str_replace: { template: '9876543210', params: { '987654': 'a', '876543': 'b', '765432': 'c', '654321': 'd', '543210': 'e' } } }, value: '9876e' },
  ...['2013-05-23', '2017-02-24'].map(
    (version): Row => ({ heat: 'test_str_replace_missing_param', version, snippet: { str_replace: { template: 'Template var1 string var2', params: { var1: 'foo', var2: 'bar', var3: 'zed' } } }, value: 'Template foo string bar' }),
  ),
  {
    heat: 'test_str_replace_strict_no_missing_param',
    version: '2017-02-24',
    snippet: { str_replace_strict: { template: 'Template var1 var1 s var2 t varvarvar3', params: { var1: 'foo', var2: 'bar', var3: 'zed', var: 'tricky ' } } },
    value: 'Template foo foo s bar t tricky tricky zed',
  },
  { heat: 'test_str_replace_strict_missing_param', version: '2017-02-24', snippet: { str_replace_strict: { template: 'Template var1 string var2', params: { var1: 'foo', var2: 'bar', var3: 'zed' } } }, error: /^The following params were not found in the template: var3$/ },
  { heat: 'test_str_replace_strict_empty_param_ok', version: '2017-02-24', snippet: { str_replace_strict: { template: 'Template var1 string var2', params: { var1: 'foo', var2: '' } } }, value: 'Template foo string ' },
  { heat: 'test_str_replace_invalid_param_types', version: '2013-05-23', snippet: { str_replace: { template: 12345, params: { var1: 'foo', var2: 'bar' } } }, error: /"str_replace" template must be a string/ },
  { heat: 'test_str_replace_invalid_param_types', version: '2013-05-23', snippet: { str_replace: { template: 'Template var1 string var2', params: ['var1', 'foo', 'var2', 'bar'] } }, error: /params must be a map/ },
  { heat: 'test_str_replace_invalid_param_keys', version: '2013-05-23', snippet: { str_replace: { tmpl: 'Template var1 string var2', params: { var1: 'foo' } } }, error: /str_replace takes \{template/ },
]

const listJoin: Row[] = [
  { heat: 'test_list_join', version: '2015-04-30', snippet: { list_join: [',', ['bar', 'baz']] }, value: 'bar,baz' },
  { heat: 'test_join_multiple', version: '2015-10-15', snippet: { list_join: [',', ['bar', 'baz'], ['bar2', 'baz2']] }, value: 'bar,baz,bar2,baz2' },
  ...['2015-04-30', '2015-10-15'].map((version): Row => ({ heat: 'test_list_join_empty_list', version, snippet: { list_join: [',', []] }, value: '' })),
  { heat: 'test_join_json', version: '2015-10-15', snippet: { list_join: [',', [{ foo: 'json' }, { foo2: 'json2' }]] }, value: '{"foo": "json"},{"foo2": "json2"}' },
  { heat: 'test_join_json', version: '2015-04-30', snippet: { list_join: [',', [{ foo: 'json' }, { foo2: 'json2' }]] }, error: /items to join must be strings, not \{"foo": "json"\}/ },
  // functions.py JoinMultiple.ensure_string: a number or a boolean is neither a string, a map nor a list.
  { heat: 'JoinMultiple.result', version: '2018-08-31', snippet: { list_join: [',', ['a', 1]] }, error: /items to join must be string, map or list, not 1/ },
  { heat: 'JoinMultiple.result', version: '2018-08-31', snippet: { list_join: [',', [true]] }, error: /items to join must be string, map or list, not true/ },
  { heat: 'Join.result', version: '2013-05-23', snippet: { list_join: [',', [2]] }, error: /items to join must be strings, not 2/ },
  // functions.py JoinMultiple: nested maps with sorted keys; a null item is '', a null list is skipped.
  { heat: 'JoinMultiple.result', version: '2018-08-31', snippet: { list_join: ['; ', [{ z: [1, { y: 2, x: null }], a: false }, null, ['b']], null, ['c']] }, value: '{"a": false, "z": [1, {"x": null, "y": 2}]}; ; ["b"]; c' },
  // functions.py Join.__init__: exactly [delimiter, list] before 2015-10-15.
  { heat: 'Join.__init__', version: '2015-04-30', snippet: { list_join: [',', ['a'], ['b']] }, error: /list_join takes \[delimiter, list\]/ },
  { heat: 'test_join_invalid', version: '2015-10-15', snippet: { list_join: 'bad' }, error: /list_join takes/ },
  { heat: 'test_join_int_invalid', version: '2015-04-30', snippet: { list_join: 5 }, error: /list_join takes/ },
  { heat: 'test_join_invalid_value', version: '2015-10-15', snippet: { list_join: [','] }, error: /list_join takes/ },
  { heat: 'test_join_invalid_multiple', version: '2015-10-15', snippet: { list_join: [',', 'bad', ['foo']] }, error: /must operate on a list/ },
]

const getAttr: Row[] = [
  { heat: 'TestGetAttAllAttributes test_get_attr_all_attributes', version: '2015-10-15', snippet: { Value: { get_attr: ['resource1'] } }, value: { Value: { Foo: 'resource1', foo: 'resource1' } } },
  { heat: 'TestGetAttAllAttributes test_get_attr_all_attributes_standard', version: '2015-10-15', snippet: { Value: { get_attr: ['resource1', 'foo'] } }, value: { Value: 'resource1' } },
  { heat: 'TestGetAttAllAttributes test_get_attr_all_attributes_str', version: '2015-10-15', snippet: { Value: { get_attr: 'resource1' } }, error: /get_attr takes \[resource name\]/ },
  { heat: 'TestGetAttAllAttributes test_get_attr_all_attributes_invalid_type', version: '2015-10-15', snippet: { Value: { get_attr: { resource1: 'attr1' } } }, error: /get_attr takes/ },
  { heat: 'TestGetAttAllAttributes test_get_attr_all_attributes_invalid_arg_list', version: '2015-10-15', snippet: { Value: { get_attr: [] } }, error: /get_attr takes/ },
  { heat: 'TestGetAttAllAttributes test_get_attr_all_attributes_invalid_resource_list', version: '2015-10-15', snippet: { Value: { get_attr: ['resource2'] } }, error: /The specified reference "resource2" \(in get_attr\) is incorrect/ },
  // template.py: GetAttAllAttributes is get_attr from HOTemplate20151015 on; GetAtt before needs an attribute.
  { heat: 'HOTemplate20150430.functions (GetAtt)', version: '2015-04-30', snippet: { get_attr: ['resource1'] }, error: /get_attr takes \[resource name, attribute name/ },
]

const repeat: Row[] = [
  { heat: 'test_repeat', version: '2015-04-30', snippet: { repeat: { template: 'this is %var%', for_each: { '%var%': ['a', 'b', 'c'] } } }, value: ['this is a', 'this is b', 'this is c'] },
  { heat: 'test_repeat_dict_with_no_replacement', version: '2016-10-14', snippet: { repeat: { template: { SERVICE_enabled: true }, for_each: { SERVICE: ['x', 'y', 'z'] } } }, value: [{ x_enabled: true }, { y_enabled: true }, { z_enabled: true }] },
  {
    heat: 'test_repeat_list_and_map',
    version: '2016-10-14',
    snippet: { repeat: { template: 'this is %var1%-%var2%', for_each: { '%var1%': ['a', 'b', 'c'], '%var2%': { x: 'v', y: 'v' } } } },
    value: ['this is a-x', 'this is a-y', 'this is b-x', 'this is b-y', 'this is c-x', 'this is c-y'],
  },
  // template.py: Repeat (lists only) before HOTemplate20161014's RepeatWithMap.
  { heat: 'Repeat._valid_arg', version: '2016-04-08', snippet: { repeat: { template: '%v%', for_each: { '%v%': { x: 1 } } } }, error: /must be lists/ },
  {
    heat: 'test_repeat_with_no_nested_loop',
    version: '2017-09-01',
    snippet: { repeat: { template: { network: '%net%', port: '%port%' }, for_each: { '%net%': ['n1', 'n2'], '%port%': ['p1', 'p2'] }, permutations: false } },
    value: [
      { network: 'n1', port: 'p1' },
      { network: 'n2', port: 'p2' },
    ],
  },
  { heat: 'test_repeat_no_nested_loop_different_len', version: '2017-09-01', snippet: { repeat: { template: '%a%%b%', for_each: { '%a%': ['n1', 'n2', 'n3'], '%b%': ['p1', 'p2'] }, permutations: false } }, error: /length of for_each values should be equal/ },
  { heat: 'test_repeat_no_nested_loop_with_dict_type', version: '2017-09-01', snippet: { repeat: { template: '%a%%b%', for_each: { '%a%': ['n1', 'n2'], '%b%': { p1: 'pp', p2: 'qq' } }, permutations: false } }, error: /must be lists/ },
  { heat: 'test_repeat_permutations_non_bool', version: '2017-09-01', snippet: { repeat: { template: '%a%', for_each: { '%a%': ['n1'] }, permutations: 'non bool' } }, error: /"permutations" should be boolean type for repeat function/ },
  { heat: 'test_repeat_bad_args (missing for_each)', version: '2015-04-30', snippet: { repeat: { template: 'this is %var%' } }, error: /repeat takes/ },
  { heat: 'test_repeat_bad_args (misspelled template)', version: '2015-04-30', snippet: { repeat: { templte: 'this is %var%', for_each: { '%var%': ['a'] } } }, error: /repeat takes/ },
  { heat: 'test_repeat_bad_arg_type', version: '2015-04-30', snippet: { repeat: { template: 'this is %var%', for_each: '%var%' } }, error: /The "for_each" argument to "repeat" must contain a map/ },
  { heat: 'test_merge_containing_repeat', version: '2016-04-08', snippet: { map_merge: { repeat: { template: { ROLE: 'ROLE' }, for_each: { ROLE: ['role1', 'role2'] } } } }, value: { role1: 'role1', role2: 'role2' } },
  { heat: 'test_merge_containing_repeat_with_none', version: '2016-04-08', snippet: { map_merge: { repeat: { template: { ROLE: 'ROLE' }, for_each: { ROLE: null } } } }, value: {} },
  {
    heat: 'test_merge_containing_repeat_multi_list_no_nested_loop_with_none (at pike, where permutations exists)',
    version: '2017-09-01',
    snippet: { map_merge: { repeat: { template: { ROLE: 'ROLE', NAME: 'NAME' }, for_each: { ROLE: null, NAME: ['n1', 'n2'] }, permutations: false } } },
    value: {},
  },
  // Heat ignores `permutations` before 2017-09-01 (Repeat does not read it); Kiln refuses an input it does not honour.
  { heat: 'RepeatWithNestedLoop._parse_args', version: '2016-10-14', snippet: { repeat: { template: 'A', for_each: { A: ['a'] }, permutations: false } }, error: /permutations needs heat_template_version 2017-09-01/ },
]

const ifFunction: Row[] = [
  { heat: 'test_if_using_boolean_condition', version: '2016-10-14', snippet: [{ if: [true, 'value_if_true', 'value_if_false'] }, { if: [false, 'value_if_true', 'value_if_false'] }], value: ['value_if_true', 'value_if_false'] },
  { heat: 'test_if_null_return', version: '2016-10-14', snippet: { if: [true, null, 'value_if_false'] }, value: null },
  { heat: 'test_if_using_condition_function', version: '2016-10-14', conditions: { create_prod: false }, snippet: { if: [{ not: 'create_prod' }, 'value_if_true', 'value_if_false'] }, value: 'value_if_true' },
  { heat: 'test_if_condition_name_non_existing', version: '2016-10-14', snippet: { if: ['cd_not_existing', 'value_true', 'value_false'] }, error: /Invalid condition "cd_not_existing"/ },
  ...[['create_prod', 'one_value'], ['create_prod', 'one_value', 'two_values', 'three_values']].map(
    (args): Row => ({ heat: 'test_if_invalid_args', version: '2016-10-14', conditions: { create_prod: true }, snippet: { if: args }, error: /Arguments to "if" must be of the form: \[condition_name, value_if_true, value_if_false\]/ }),
  ),
  ...[['create_prod'], ['create_prod', 'one_value', 'two_values', 'three_values']].map(
    (args): Row => ({ heat: 'test_if_nullable_invalid_args', version: '2021-04-16', conditions: { create_prod: true }, snippet: { if: args }, error: /Arguments to "if" must be of the form/ }),
  ),
  {
    heat: 'test_if_nullable',
    version: '2021-04-16',
    snippet: {
      single: { if: [false, 'value_if_true'] },
      nested_true: { if: [true, { if: [false, 'foo'] }, 'bar'] },
      nested_false: { if: [false, 'baz', { if: [false, 'quux'] }] },
      control: { if: [false, true, null] },
    },
    value: { control: null },
  },
  { heat: 'test_if_nullable', version: '2021-04-16', snippet: { single: { if: [true, 'value_if_true'] } }, value: { single: 'value_if_true' } },
  // functions.py IfNullable: "the enclosing item (list item, dictionary key/value pair, ...) will be treated as if it were not mentioned".
  { heat: 'IfNullable', version: '2021-04-16', snippet: ['a', { if: [false, 'b'] }, 'c'], value: ['a', 'c'] },
  // test_if_empty_return: Ellipsis where nothing encloses it; an output's value resolves it to None (function.resolve).
  { heat: 'test_if_empty_return', version: '2021-04-16', snippet: { if: [false, 'value_if_true'] }, value: null },
]

const conditionFunctions: Row[] = [
  ...[
    [{}, 'value_if_false'],
    [{ env_type: 'prod' }, 'value_if_true'],
  ].map(
    ([params, value]): Row => ({
      heat: 'test_equals',
      version: '2016-10-14',
      parameters: { env_type: { type: 'string', default: 'test' } },
      params: params as Record<string, unknown>,
      conditions: { prod: { equals: [{ get_param: 'env_type' }, 'prod'] } },
      snippet: { if: ['prod', 'value_if_true', 'value_if_false'] },
      value,
    }),
  ),
  ...[['test', 'prod', 'invalid'], 'invalid condition'].map(
    (args): Row => ({ heat: 'test_equals_invalid_args', version: '2016-10-14', conditions: { c: { equals: args } }, snippet: { if: ['c', 1, 2] }, error: /equals takes \[value, value\]/, path: 'conditions.c.equals' }),
  ),
  {
    heat: 'test_equals_with_non_supported_function',
    version: '2016-10-14',
    conditions: { c: { equals: [{ get_attr: ['resource1', 'foo'] }, { get_attr: ['resource1', 'Foo'] }] } },
    snippet: { if: ['c', 1, 2] },
    error: /get_attr cannot be used in a condition/,
    path: 'conditions.c.equals',
  },
  // template.py HOTemplate20161014.__init__: inside a condition every function but the condition functions is Invalid.
  { heat: 'HOTemplate20161014._parser_condition_functions', version: '2016-10-14', conditions: { c: { equals: [{ list_join: ['', ['a']] }, 'a'] } }, snippet: { if: ['c', 1, 2] }, error: /list_join cannot be used in a condition/, path: 'conditions.c.equals' },
  { heat: 'HOTemplate20170901.condition_functions', version: '2017-09-01', conditions: { c: { equals: [{ contains: ['a', ['a']] }, true] } }, snippet: { if: ['c', 1, 2] }, value: 1 },
  { heat: 'HOTemplate20161014.condition_functions', version: '2016-10-14', conditions: { c: { equals: [{ not: false }, true] } }, snippet: { if: ['c', 1, 2] }, value: 1 },
  // template.py: equals, not, and, or are condition_functions only, never in `functions`.
  ...[{ equals: ['a', 'a'] }, { not: true }, { and: [true, true] }, { or: [true, false] }].map(
    (snippet): Row => ({ heat: 'HOTemplate20161014.functions', version: '2021-04-16', snippet, error: /is a condition function: it can only be used in a condition/, path: `outputs.out.value.${Object.keys(snippet)[0]}` }),
  ),
]

describe('template functions exactly as Heat', () => {
  const tables: [string, Row[]][] = [
    ['version gates', versionGates],
    ['str_replace', strReplace],
    ['list_join', listJoin],
    ['get_attr', getAttr],
    ['repeat', repeat],
    ['if', ifFunction],
    ['condition functions', conditionFunctions],
  ]
  for (const [name, rows] of tables) {
    describe(name, () => {
      test.each(rows.map((r) => [`${r.heat} @ ${r.version}: ${JSON.stringify(r.snippet)}`, r] as const))('%s', (_, row) => check(row))
    })
  }

  test('test_if_referenced_by_resource_empty: a two-argument if whose condition is false leaves the property out', () => {
    const src = ['heat_template_version: wallaby', 'conditions:', '  create_prod: false', 'resources:', '  r:', '    type: OS::Heat::None', '    properties:', '      Foo: {if: [create_prod, prod]}', '      Bar: [a, {if: [create_prod, b]}]', ''].join('\n')
    const def = buildDefinition(parseTemplate(src), { types })
    expect(resolveProperties(def, 'r', ctx)).toEqual({ Bar: ['a'] })
  })

  test('a version gate names the line and column of the function in the text', () => {
    const src = ['heat_template_version: 2015-10-15', 'resources:', '  r:', '    type: OS::Heat::None', '    properties:', '      y: {map_merge: [{a: 1}]}', ''].join('\n')
    try {
      buildDefinition(parseTemplate(src), { types })
      throw new Error('expected a TemplateError')
    } catch (err) {
      if (!(err instanceof TemplateError)) throw err
      expect(err.issues).toEqual([expect.objectContaining({ code: 'function', path: 'resources.r.properties.y.map_merge', line: 6, column: 11 })])
    }
  })

  test('what the new forms make from a secret stays secret: JSON of a hidden map, a repeat over its keys, every attribute of a secret one', () => {
    const src = [
      'heat_template_version: 2021-04-16',
      'parameters:',
      '  creds: { type: json, hidden: true }',
      'resources:',
      '  handle: { type: OS::Heat::WaitConditionHandle }',
      '  replaced: { type: OS::Heat::None, properties: { v: { str_replace: { template: "conf=C", params: { C: { get_param: creds } } } } } }',
      '  repeated: { type: OS::Heat::None, properties: { v: { repeat: { for_each: { "%k%": { get_param: creds } }, template: "key-%k%" } } } }',
      '  all: { type: OS::Heat::None, properties: { v: { get_attr: [handle] } } }',
      '',
    ].join('\n')
    const creds = { 'user-name-xyz': 'pass-word-é-123' }
    const def = buildDefinition(parseTemplate(src), { parameters: { creds }, types })
    const replaced = def.resources.replaced!.properties.v as string
    expect(replaced).toBe('conf={"user-name-xyz": "pass-word-\\u00e9-123"}')
    expect(def.resources.replaced!.secretForms).toContain(replaced)
    expect(def.resources.repeated!.properties.v).toEqual(['key-user-name-xyz'])
    expect(def.resources.repeated!.secretForms).toContain('key-user-name-xyz')
    const TOKEN = 'kiln_sig_token-value-0123456789'
    const handle = { name: 'handle', physicalId: 'h-1', attributes: { token: TOKEN, endpoint: 'http://kiln/signal' }, secretAttributes: ['token'] }
    const all = resolveSecretAware(def, 'all', valuesContext([handle]), knownSecrets(def, 'all'))
    expect(all.properties.v).toEqual({ token: TOKEN, endpoint: 'http://kiln/signal' })
    expect(all.secretForms).toContain(TOKEN)
    expect(redact(all.properties, all.secretForms)).toEqual({ v: { token: '******', endpoint: 'http://kiln/signal' } })
  })
})
