/**
 * Type packages (KILN_TYPE_PACKAGES): a package written against the SDK
 * (test/fixtures/type-package) is loaded by the workers and the API, its
 * type converges in a stack like a built-in one (create, drift, update,
 * delete), and it passes the conformance kit; a package that is not right
 * stops the load with a message naming it and the place.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { checkPackage } from '../../lib/cli/types-test'
import { loadTypePackages } from '../../lib/resources/packages'
import { useKilnEnv } from '../helpers/stack-env'

const PACKAGE = './test/fixtures/type-package'
const { cluster: c, api } = useKilnEnv({ cluster: { workers: 1, env: { KILN_TYPE_PACKAGES: PACKAGE } } })

let dir: string
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-greetings-'))
})
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

const greeting = (name: string) =>
  JSON.stringify({
    heat_template_version: '2018-08-31',
    resources: { hi: { type: 'Example::Greeting', properties: { name, dir } }, v: { type: 'OS::Heat::Value', properties: { value: { get_attr: ['hi', 'text'] } } } },
    outputs: { text: { value: { get_attr: ['v', 'value'] } } },
  })

describe('type packages', () => {
  test("a package's type converges in a stack: create, data flowing on, drift, update in place, delete", async () => {
    const r = await api.call('POST', '/api/stacks', { body: { name: 'greetings', template: greeting('world') } })
    expect(r.status, r.text).toBe(201)
    const id = r.body.stack.id as string
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    const text = async () => (await api.call('GET', `/api/stacks/${id}/outputs`)).body.outputs.text.value
    expect(await text()).toBe('Hello, world!')
    const [file] = fs.readdirSync(dir)
    fs.writeFileSync(path.join(dir, file!), 'Hello, stranger!')
    expect((await api.call('POST', `/api/stacks/${id}/drift`, { body: {} })).status).toBe(202)
    expect(await c.settle(id)).toBe('DRIFT_COMPLETE')
    expect((await api.call('GET', `/api/stacks/${id}/drift`)).body.drift.resources.find((x: { name: string }) => x.name === 'hi')).toMatchObject({ state: 'MODIFIED', changes: [{ property: 'name', stored: 'world', seen: 'stranger' }] })
    expect((await api.call('PUT', `/api/stacks/${id}`, { body: { template: greeting('Kiln') } })).status).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect(await text()).toBe('Hello, Kiln!')
    expect(fs.readdirSync(dir), 'updated in place: the same file').toEqual([file])
    expect((await api.call('DELETE', `/api/stacks/${id}`)).status).toBeLessThan(300)
    expect(await c.settle(id)).toBe('DELETE_COMPLETE')
    expect(fs.readdirSync(dir)).toEqual([])
    expect((await api.call('GET', '/api/resource-types/Example::Greeting')).body.properties.name).toMatchObject({ type: 'string', required: true, update_allowed: true })
  })

  test('it passes the conformance kit', async () => {
    const results = await checkPackage(PACKAGE, { 'Example::Greeting': { name: 'kit', dir } })
    expect(results.filter((r) => r.outcome === 'fail')).toEqual([])
    expect(results.filter((r) => r.outcome === 'pass').map((r) => r.check)).toEqual(['idempotent create', 'observe agrees with create', 'adopt agrees with observe', 'abort is honoured', 'delete of what is gone succeeds'])
  })

  test('a package that is not right stops the load, naming it and the place', async () => {
    const write = (name: string, body: string) => {
      const file = path.join(dir, name)
      fs.writeFileSync(file, body)
      return file
    }
    const reserved = write('reserved.mjs', `export default (kiln) => [kiln.defineResourceType({ name: 'OS::Mine', description: 'x', properties: {}, attributes: {}, create: async () => ({}), update: async () => ({}), delete: async () => {} })]`)
    await expect(loadTypePackages([reserved])).rejects.toThrow(`KILN_TYPE_PACKAGES: ${reserved}: OS::Mine: the prefix OS:: is reserved`)
    const noDelete = write('no-delete.mjs', `export default [{ name: 'Acme::Thing', description: 'x', properties: {}, attributes: {}, create: async () => ({}), update: async () => ({}) }]`)
    await expect(loadTypePackages([noDelete])).rejects.toThrow(`KILN_TYPE_PACKAGES: ${noDelete}: Acme::Thing: delete: an async function`)
    const badProperty = write('bad-property.mjs', `export default [{ name: 'Acme::Thing', description: 'x', properties: { size: { type: 'int' } }, attributes: {}, create: async () => ({}), update: async () => ({}), delete: async () => {} }]`)
    await expect(loadTypePackages([badProperty])).rejects.toThrow(/Acme::Thing: properties\.size: type must be one of string, integer/)
    await expect(loadTypePackages(['kiln-no-such-package'])).rejects.toThrow(/KILN_TYPE_PACKAGES: kiln-no-such-package could not be loaded/)
    const empty = write('empty.mjs', 'export default []')
    await expect(loadTypePackages([empty])).rejects.toThrow(/exports no resource type/)
  })
})
