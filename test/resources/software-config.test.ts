/**
 * Heat's config holders in a stack: SoftwareConfig, StructuredConfig,
 * CloudConfig and MultipartMime hold their config (the `config` attribute)
 * for others to read; any change makes a new one; a MultipartMime part given
 * by a config's id, which Kiln cannot look up, fails with a reason saying
 * what to write instead, and a part of type multipart is a 400.
 */
import { describe, expect, test } from 'vitest'
import { mimeMessage } from '../../lib/resources/builtin/software-config'
import { useKilnEnv } from '../helpers/stack-env'

const { cluster: c, api } = useKilnEnv({ cluster: { workers: 1 } })

const template = (script: string) => ({
  heat_template_version: '2018-08-31',
  resources: {
    script: { type: 'OS::Heat::SoftwareConfig', properties: { group: 'script', config: script, inputs: [{ name: 'port', type: 'Number', default: '80' }], outputs: [{ name: 'result' }] } },
    structured: { type: 'OS::Heat::StructuredConfig', properties: { config: { packages: ['nginx'] } } },
    cloud: { type: 'OS::Heat::CloudConfig', properties: { cloud_config: { packages: ['nginx'], runcmd: ['systemctl start nginx'] } } },
    userdata: {
      type: 'OS::Heat::MultipartMime',
      properties: { parts: [{ config: { get_attr: ['cloud', 'config'] } }, { config: { get_attr: ['script', 'config'] }, filename: 'start.sh', subtype: 'x-shellscript' }] },
    },
  },
  outputs: {
    script: { value: { get_attr: ['script', 'config'] } },
    structured: { value: { get_attr: ['structured', 'config'] } },
    cloud: { value: { get_attr: ['cloud', 'config'] } },
    userdata: { value: { get_attr: ['userdata', 'config'] } },
    id: { value: { get_resource: 'script' } },
  },
})

const outputs = async (id: string) => Object.fromEntries(Object.entries((await api.call('GET', `/api/stacks/${id}/outputs`)).body.outputs as Record<string, { value: unknown }>).map(([k, o]) => [k, o.value]))

describe('config holders', () => {
  test('they hold their config for others; a change makes a new one', async () => {
    const r = await api.call('POST', '/api/stacks', { body: { name: 'configs', template: JSON.stringify(template('#!/bin/sh\necho hi')) } })
    expect(r.status, r.text).toBe(201)
    const id = r.body.stack.id as string
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    const first = await outputs(id)
    expect(first.script).toBe('#!/bin/sh\necho hi')
    expect(first.structured).toEqual({ packages: ['nginx'] })
    expect(first.cloud).toBe('#cloud-config\npackages:\n  - nginx\nruncmd:\n  - systemctl start nginx\n')
    const message = String(first.userdata)
    expect(message).toMatch(/^Content-Type: multipart\/mixed; boundary="===============\d{19}=="\nMIME-Version: 1.0\n/)
    expect(message).toContain('Content-Type: text/plain; charset="utf-8"\nMIME-Version: 1.0\nContent-Transfer-Encoding: 7bit\n\n#cloud-config\npackages:')
    expect(message).toContain('Content-Type: text/x-shellscript; charset="utf-8"\nMIME-Version: 1.0\nContent-Transfer-Encoding: 7bit\nContent-Disposition: attachment; filename="start.sh"\n\n#!/bin/sh\necho hi')
    expect(first.id).toMatch(/^[0-9a-f-]{36}$/)

    const u = await api.call('PUT', `/api/stacks/${id}`, { body: { template: JSON.stringify(template('#!/bin/sh\necho bye')) } })
    expect(u.status, u.text).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    const second = await outputs(id)
    expect(second.script).toBe('#!/bin/sh\necho bye')
    expect(second.id, 'a new config').not.toBe(first.id)
    expect(second.cloud, 'unchanged').toBe(first.cloud)
    expect(String(second.userdata)).toContain('echo bye')
  })

  test("a part given by a config's id fails, saying what to write instead; a multipart part is a 400", async () => {
    const byId = await api.call('POST', '/api/stacks', {
      body: { name: 'by-id', template: JSON.stringify({ heat_template_version: '2018-08-31', resources: { s: { type: 'OS::Heat::SoftwareConfig', properties: { config: 'x' } }, m: { type: 'OS::Heat::MultipartMime', properties: { parts: [{ config: { get_resource: 's' } }] } } } }) },
    })
    expect(byId.status, byId.text).toBe(201)
    expect(await c.settle(byId.body.stack.id)).toBe('CREATE_FAILED')
    const rows = (await api.call('GET', `/api/stacks/${byId.body.stack.id}/resources`)).body.resources as { name: string; statusReason?: string; status_reason?: string }[]
    expect(String(rows.find((x) => x.name === 'm')!.statusReason ?? rows.find((x) => x.name === 'm')!.status_reason)).toMatch(/parts\[0\]\.config: .* looks like a config's id; .*get_attr: \[<config resource>, config\]/)
    const multipart = await api.call('POST', '/api/stacks', { body: { name: 'multipart', template: JSON.stringify({ heat_template_version: '2018-08-31', resources: { m: { type: 'OS::Heat::MultipartMime', properties: { parts: [{ config: 'x', type: 'multipart' }] } } } }) } })
    expect(multipart.status).toBe(400)
    expect(multipart.text).toContain('a part of type multipart (merging another MIME message) is not supported')
  })

  test('a MIME message without parts is still a message', () => {
    expect(mimeMessage([], 'b')).toBe('Content-Type: multipart/mixed; boundary="b"\nMIME-Version: 1.0\n\n--b--\n')
  })
})
