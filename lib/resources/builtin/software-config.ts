/**
 * Heat's config holders (heat/engine/resources/openstack/heat/
 * software_config.py, structured_config.py, cloud_config.py,
 * multi_part.py): they hold a configuration for something else to deliver
 * (a server's user data, a deployment), and do nothing themselves. Each is
 * immutable, as Heat's software configs are: any change makes a new one. The
 * physical id is the config's id; the `config` attribute is its value.
 *
 * Kiln keeps them as state only: it has no software-config store, so a
 * MultipartMime part names its config by value (get_attr [cfg, config]), not
 * by a config's id, and a part of type multipart (merging another MIME
 * message) is refused when the template is checked.
 */
import crypto from 'node:crypto'
import { stringify } from 'yaml'
import { defineResourceType, ResourceActionError, type PropertySchema, type PropertyType, type ResourceType } from '../../sdk'
import { observeStored } from './util'

const IO_TYPES = ['String', 'Number', 'CommaDelimitedList', 'Json', 'Boolean']
const GROUP: PropertySchema = { type: 'string', default: 'Heat::Ungrouped', description: 'Namespace to group this config by when delivered to a server (which tool applies it).' }

const ioSchema = (output: boolean): PropertySchema => ({
  type: 'list',
  items: {
    type: 'map',
    schema: {
      name: { type: 'string', required: true, description: `Name of the ${output ? 'output' : 'input'}.` },
      description: { type: 'string', description: `Description of the ${output ? 'output' : 'input'}.` },
      type: { type: 'string', default: 'String', constraints: [{ allowed_values: IO_TYPES }], description: 'Type of the value.' },
      ...(output
        ? { error_output: { type: 'boolean', default: false, description: 'The deployment is in an error state if this output has a value.' } }
        : { default: { type: 'string', description: 'Default value for the input if none is specified.' }, replace_on_change: { type: 'boolean', default: false, description: 'Replace the deployment when this input changes.' } }),
    },
  },
  description: output ? 'Schema of the outputs the config produces.' : 'Schema of the inputs the config expects.',
})

/** SoftwareConfig's and StructuredConfig's properties: `config` (text or a map), with the tool's group, options and the schema of inputs and outputs. */
const configProperties = (config: PropertySchema): Record<string, PropertySchema> => ({
  group: GROUP,
  config,
  options: { type: 'map', description: 'Options of the configuration tool.' },
  inputs: ioSchema(false),
  outputs: ioSchema(true),
})

/** A config holder: state only, immutable, its id a fresh uuid, its `config` attribute (of `configType`) made from the properties. */
function holder(name: string, description: string, properties: Record<string, PropertySchema>, configOf: (props: Record<string, unknown>) => unknown, configType: PropertyType = 'string'): ResourceType {
  return defineResourceType({
    name,
    stateOnly: true,
    description,
    properties,
    attributes: { config: { description: 'The config value.', type: configType } },
    async create(_ctx, props) {
      return { physicalId: crypto.randomUUID(), attributes: { config: configOf(props) } }
    },
    // Nothing is updatable: every change replaces the config, as Heat's immutable software configs do.
    async update(_ctx, _props, prev) {
      return { attributes: prev.attributes }
    },
    async delete() {},
    observe: observeStored,
  })
}

export const softwareConfigResource = holder(
  'OS::Heat::SoftwareConfig',
  'Holds a configuration script or manifest (and the schema of its inputs and outputs) for something else to apply. Any change makes a new config.',
  configProperties({ type: 'string', description: 'Configuration script or manifest.' }),
  (p) => p.config ?? '',
)

export const structuredConfigResource = holder(
  'OS::Heat::StructuredConfig',
  'Holds a structured configuration (a map) for something else to apply. Any change makes a new config.',
  configProperties({ type: 'map', description: 'The configuration, as a map.' }),
  (p) => p.config ?? {},
  'map',
)

export const cloudConfigResource = holder(
  'OS::Heat::CloudConfig',
  'Holds a cloud-init cloud-config document; its config attribute is the document, starting #cloud-config. Any change makes a new config.',
  { cloud_config: { type: 'map', description: 'The cloud-config data, as a map.' } },
  // Keys sorted, as PyYAML dumps them in Heat (and as Kiln stores maps, in no order of their own).
  (p) => `#cloud-config\n${stringify(p.cloud_config ?? {}, { sortMapEntries: true })}`,
)

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** A multipart/mixed MIME message of text parts, as Heat's MultipartMime assembles with Python's email package. */
export function mimeMessage(parts: { config: string; filename?: string; subtype?: string }[], boundary: string): string {
  const out = [`Content-Type: multipart/mixed; boundary="${boundary}"`, 'MIME-Version: 1.0', '']
  for (const p of parts) {
    const subtype = p.subtype || (p.filename ? p.filename.replace(/\.[^.]*$/, '') : '') || 'plain'
    out.push(`--${boundary}`, `Content-Type: text/${subtype}; charset="utf-8"`, 'MIME-Version: 1.0', 'Content-Transfer-Encoding: 7bit')
    if (p.filename) out.push(`Content-Disposition: attachment; filename="${p.filename}"`)
    out.push('', p.config)
  }
  out.push(`--${boundary}--`, '')
  return out.join('\n')
}

export const multipartMimeResource = holder(
  'OS::Heat::MultipartMime',
  'Assembles text parts into one multipart MIME message (cloud-init user data); its config attribute is the message. Parts are given by value. Any change makes a new message.',
  {
    group: GROUP,
    parts: {
      type: 'list',
      default: [],
      items: {
        type: 'map',
        schema: {
          config: { type: 'string', required: true, description: "The part's content (get_attr [cfg, config] of a config holder; Kiln keeps no config store to look an id up in)." },
          filename: { type: 'string', description: 'Filename of the part (its subtype, when subtype is not given, is the name without its extension).' },
          type: { type: 'string', default: 'text', constraints: [{ allowed_values: ['text'], description: 'text: a part of type multipart (merging another MIME message) is not supported' }], description: 'Type of the part.' },
          subtype: { type: 'string', description: 'MIME subtype of the part (text/<subtype>).' },
        },
      },
      description: 'The parts of the message.',
    },
  },
  (p) => {
    const parts = (p.parts ?? []) as { config: string; filename?: string; subtype?: string }[]
    const byId = parts.findIndex((x) => UUID.test(String(x.config).trim()))
    if (byId >= 0) throw new ResourceActionError(`parts[${byId}].config: ${parts[byId]!.config} looks like a config's id; Kiln keeps no config store to look it up in: give the config itself (get_attr: [<config resource>, config])`)
    // Stable for the same parts, so that the message does not change when nothing did.
    const boundary = `===============${BigInt(`0x${crypto.createHash('sha256').update(JSON.stringify(parts)).digest('hex').slice(0, 15)}`).toString().padStart(19, '0')}==`
    return mimeMessage(parts, boundary)
  },
)
