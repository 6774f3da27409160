/**
 * Secrecy follows the value through evaluation (lib/template/secrecy.ts): what
 * a function makes from a hidden parameter or a secret attribute is secret
 * too, in the static phase and at run time, across the evaluation threads'
 * encoding, in outputs (`sensitive`) and in the definition's issue messages;
 * what only passes values on, or a condition's choice, makes nothing new.
 */
import { describe, expect, test } from 'vitest'
import { decodeDeferred, encodeDeferred } from '../../lib/evaluation/codec'
import { valuesContext } from '../../lib/evaluation/tasks'
import { builtinTypes, createRegistry, typeCatalog } from '../../lib/resources/registry'
import { buildDefinition, holdsSecret, knownSecrets, parseTemplate, redact, resolveOutputs, resolveSecretAware, secretList, storedForms, TemplateError, type ResolveContext, type StackDefinition } from '../../lib/template'

const types = typeCatalog(createRegistry(builtinTypes()))
const PW = 'Hunter2-s3cret,second-part'

const build = (src: string, params: Record<string, unknown> = { pw: PW }) => buildDefinition(parseTemplate(src), { parameters: params, types })

const TEMPLATE = `heat_template_version: 2018-08-31
parameters:
  pw: { type: string, hidden: true }
  plain: { type: string, default: visible-value }
  prod: { type: boolean, default: true }
conditions:
  is_hunter: { equals: [{ get_param: pw }, '${PW}'] }
resources:
  handle: { type: OS::Heat::WaitConditionHandle }
  pieces: { type: OS::Heat::Value, properties: { value: { str_split: [',', { get_param: pw }] } } }
  piece: { type: OS::Heat::Value, properties: { value: { str_split: [',', { get_param: pw }, 1] } } }
  replaced: { type: OS::Heat::Value, properties: { value: { str_replace: { template: 'user:PW@db', params: { PW: { get_param: pw } } } } } }
  joined: { type: OS::Heat::Value, properties: { value: { list_join: ['+', [{ get_param: pw }, 'x']] } } }
  repeated: { type: OS::Heat::Value, properties: { value: { repeat: { for_each: { '%p%': { str_split: [',', { get_param: pw }] }, '%q%': [k1] }, template: { 'n-%p%': 'v-%p%-%q%', fixed: 'constant-text' } } } } }
  digested: { type: OS::Heat::Value, properties: { value: { digest: [sha256, { get_param: pw }] } } }
  concat: { type: OS::Heat::Value, properties: { value: { list_concat: [[{ get_param: pw }], [aaa, 'plain-entry']] } } }
  chosen: { type: OS::Heat::Value, properties: { value: { list_join: ['', [{ if: [is_hunter, 'chosen-when-true', 'chosen-when-false'] }]] } } }
  mixed: { type: OS::Heat::Value, properties: { value: { list_join: ['|', [{ str_split: [',', { get_param: pw }, 0] }, { get_attr: [handle, endpoint] }]] } } }
  curl: { type: OS::Heat::Value, properties: { value: { str_replace: { template: 'run TOKEN now', params: { TOKEN: { get_attr: [handle, token] } } } } } }
  echo: { type: OS::Heat::Value, properties: { value: { get_attr: [piece, value] } } }
  echoed: { type: OS::Heat::Value, properties: { value: { str_replace: { template: '<V>', params: { V: { get_attr: [piece, value] } } } } } }
  open: { type: OS::Heat::Value, properties: { value: { list_join: ['-', [{ get_param: plain }, { get_attr: [handle, endpoint] }]] } } }
outputs:
  direct: { value: { get_param: pw } }
  via_token: { value: { get_attr: [handle, curl_cli] } }
  plain: { value: { get_param: plain } }
  open: { value: { get_attr: [handle, endpoint] } }
`

const TOKEN = 'kiln_sig_token-value-0123456789'
const handle = { name: 'handle', physicalId: 'h-1', attributes: { token: TOKEN, endpoint: 'http://kiln/signal', curl_cli: `curl -H 'X-Auth-Token: ${TOKEN}'` }, secretAttributes: ['token', 'curl_cli', 'signal'] }

/** Resolve `name` as the worker does, with `handle` (and `more`) as inputs. */
function resolve(def: StackDefinition, name: string, more: Parameters<typeof valuesContext>[0] = []) {
  return resolveSecretAware(def, name, valuesContext([handle, ...more]), knownSecrets(def, name))
}

describe('the static phase', () => {
  const def = build(TEMPLATE)

  test('what functions make from a hidden parameter is secret: pieces, replacements, joins, repeats, digests', () => {
    expect(def.secretForms).toEqual([PW])
    expect(def.resources.pieces!.secretForms).toEqual(expect.arrayContaining(['Hunter2-s3cret', 'second-part']))
    expect(def.resources.replaced!.secretForms).toEqual([`user:${PW}@db`])
    expect(def.resources.joined!.secretForms).toEqual([`${PW}+x`])
    const digest = def.resources.digested!.properties.value as string
    expect(def.resources.digested!.secretForms).toEqual([digest])
    // a repeat: the strings it substituted a secret into are secret; its constant text is not
    const repeated = def.resources.repeated!.secretForms!
    expect(repeated).toEqual(expect.arrayContaining(['n-Hunter2-s3cret', 'v-Hunter2-s3cret-k1', 'n-second-part', 'v-second-part-k1']))
    expect(repeated).not.toContain('constant-text')
    expect(repeated).not.toContain('fixed')
  })

  test('functions that pass values on make nothing new, and a condition on a secret does not make its choice secret', () => {
    expect(def.resources.concat!.properties.value).toEqual([PW, 'aaa', 'plain-entry'])
    expect(def.resources.concat!.secretForms).toBeUndefined()
    expect(def.resources.chosen!.properties.value).toBe('chosen-when-true')
    expect(def.resources.chosen!.secretForms).toBeUndefined()
    expect(def.resources.open!.secretForms).toBeUndefined()
  })

  test('outputs that read a secret are sensitive; the others are not', () => {
    expect(def.outputs.direct!.sensitive).toBe(true)
    expect(def.outputs.plain!.sensitive).toBeUndefined()
    expect(def.outputs.via_token!.sensitive).toBeUndefined() // known only at run time
  })

  test('a Deferred over a secret says so, across the evaluation threads’ encoding', () => {
    const mixed = decodeDeferred(encodeDeferred(def.resources.mixed!.properties)) as Record<string, { secret: boolean }>
    expect(mixed.value!.secret).toBe(true)
    expect((decodeDeferred(encodeDeferred(def.resources.open!.properties)) as Record<string, { secret: boolean }>).value!.secret).toBe(false)
  })

  test('no issue message quotes a value made from a secret', () => {
    const src = `heat_template_version: 2018-08-31
parameters:
  pw: { type: string, hidden: true }
resources:
  w: { type: OS::Heat::TestResource, properties: { wait_secs: { str_split: [',', { get_param: pw }, 1] } } }
  m: { type: OS::Heat::Value, properties: { value: { map_replace: [{ a: 1, b: 2 }, { keys: { a: { str_split: [',', { get_param: pw }, 0] }, b: { str_split: [',', { get_param: pw }, 0] } } }] } } }
`
    let err: unknown
    try {
      build(src)
    } catch (e) {
      err = e
    }
    expect(err).toBeInstanceOf(TemplateError)
    const text = JSON.stringify((err as TemplateError).issues)
    expect(text).toMatch(/wait_secs/) // the problems are reported…
    expect(text).toMatch(/map_replace/)
    expect(text).not.toContain('second-part') // …without the pieces they are about
    expect(text).not.toContain('Hunter2-s3cret')
  })
})

describe('at run time', () => {
  const def = build(TEMPLATE)

  test('a secret attribute makes what is made from it secret; the row stores the forms its properties carry', () => {
    const curl = resolve(def, 'curl')
    expect(curl.properties.value).toBe(`run ${TOKEN} now`)
    expect(curl.secretForms).toEqual([`run ${TOKEN} now`])
    // a static secret argument carries over into the runtime result
    const mixed = resolve(def, 'mixed')
    expect(mixed.properties.value).toBe('Hunter2-s3cret|http://kiln/signal')
    expect(mixed.secretForms).toEqual(['Hunter2-s3cret|http://kiln/signal'])
    // static forms are stored with the properties that carry them
    expect(resolve(def, 'pieces').secretForms).toEqual(expect.arrayContaining(['Hunter2-s3cret', 'second-part']))
    // and nothing is secret where nothing secret was read
    expect(resolve(def, 'open')).toEqual({ properties: { value: 'visible-value-http://kiln/signal' }, secretForms: [] })
  })

  test('an attribute that passes on a secret its resource was made from is secret', () => {
    const piece = { name: 'piece', physicalId: 'p-1', attributes: { value: 'second-part' }, secretForms: ['second-part'] }
    expect(resolve(def, 'echo', [piece]).secretForms).toEqual(['second-part'])
    expect(resolve(def, 'echoed', [piece]).secretForms).toEqual(['<second-part>'])
    // the same attribute without the row's forms reads as an ordinary value
    expect(resolve(def, 'echoed', [{ ...piece, secretForms: [] }]).secretForms).toEqual([])
  })

  test('outputs evaluated from a secret attribute are sensitive at run time', () => {
    const out = resolveOutputs(def, valuesContext([handle]))
    expect(out.via_token).toMatchObject({ sensitive: true })
    expect(out.direct).toMatchObject({ value: PW, sensitive: true })
    expect(out.open).toEqual({ value: 'http://kiln/signal' })
    expect(out.plain).toEqual({ value: 'visible-value' })
  })

  test('masking with the learned forms hides every piece, whole or inside other text', () => {
    const forms = [...def.secretForms, ...resolve(def, 'pieces').secretForms, ...resolve(def, 'repeated').secretForms]
    const shown = redact({ v: resolve(def, 'repeated').properties, note: 'the key was Hunter2-s3cret' }, forms.sort((a, b) => b.length - a.length))
    expect(JSON.stringify(shown)).not.toMatch(/Hunter2|second-part/)
    expect(JSON.stringify(shown)).toContain('constant-text')
  })

  test('a long form is stored as its digest and masked where it stands whole', () => {
    const long = `${'x'.repeat(600)}${TOKEN}`
    const stored = storedForms([long, TOKEN])
    expect(stored).toEqual([expect.stringMatching(/^#sha256:[0-9a-f]{64}$/), TOKEN])
    expect(JSON.stringify(stored)).not.toContain('x'.repeat(100))
    const secrets = secretList(stored)
    expect(redact({ a: long, b: [long], c: `${long}!`, d: 'short and open' }, secrets)).toEqual({ a: '******', b: ['******'], c: `${'x'.repeat(600)}******!`, d: 'short and open' })
    expect(holdsSecret(long, secretList([stored[0]!]))).toBe(true)
    expect(holdsSecret(`${long}!`, secretList([stored[0]!]))).toBe(false) // whole only
    // a short form that merely looks like a digest entry is still masked as text
    expect(redact('#sha256:' + 'a'.repeat(64), secretList(['#sha256:' + 'a'.repeat(64)]))).toBe('******')
  })

  test('a context without secret information (a preview) evaluates as before', () => {
    const ctx: ResolveContext = { getResource: () => 'x', getAttr: () => 'attr-value' }
    expect(resolveSecretAware(def, 'curl', ctx, []).properties.value).toBe('run attr-value now')
  })
})
