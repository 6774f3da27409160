/**
 * The resource provider protocol, version 1: the messages between Kiln and
 * an HTTP provider, as zod schemas. Kiln checks every reply against them, and
 * docs/reference/provider-protocol.md (with a JSON Schema of every message)
 * is generated from them, so the document cannot drift from the code.
 *
 * Kiln → provider: `GET /types`; `POST /create`, `/update`, `/delete`,
 * `/observe`, `/adopt` and `/cancel`, each with an ActionRequest. Every
 * request is signed (Kiln-Signature, ./signature.ts).
 * Provider → Kiln: `POST` to the request's `callback` URL when a long
 * operation (answered 202) has moved on.
 */
import { z } from 'zod'

export const PROTOCOL_VERSION = 1

/** A type's own name; Kiln names it `<prefix>::<name>` for the project that registers the provider. */
const TYPE_NAME = /^[A-Z][A-Za-z0-9]*(?:::[A-Z][A-Za-z0-9]*)*$/
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

export const PropertyDecl = z
  .object({
    type: z.enum(['string', 'integer', 'number', 'boolean', 'map', 'list', 'any']).describe('The value\'s type, as in a Heat resource schema.'),
    description: z.string().max(2000).optional(),
    required: z.boolean().optional(),
    default: z.unknown().optional(),
    update_allowed: z.boolean().optional().describe('A change updates the resource in place (POST /update); otherwise it replaces the resource.'),
    immutable: z.boolean().optional().describe('The property can never change: an update that changes it fails, naming it.'),
    secret: z.boolean().optional().describe('Never shown in API responses, events or logs.'),
  })
  .strict()

export const AttributeDecl = z
  .object({
    description: z.string().max(2000).optional(),
    type: z.enum(['string', 'integer', 'number', 'boolean', 'map', 'list', 'any']).optional(),
    secret: z.boolean().optional().describe('Masked wherever secrets are.'),
  })
  .strict()

export const OPERATIONS = ['create', 'update', 'delete', 'observe', 'adopt', 'cancel', 'signal'] as const
export type Operation = (typeof OPERATIONS)[number]

export const TypeDecl = z
  .object({
    name: z.string().regex(TYPE_NAME, 'a type name is words of letters and digits, each starting with a capital, joined by ::').max(100),
    description: z.string().max(2000).optional(),
    properties: z.record(z.string().regex(NAME).max(100), PropertyDecl).default({}),
    attributes: z.record(z.string().regex(NAME).max(100), AttributeDecl).default({}),
    operations: z
      .array(z.enum(OPERATIONS))
      .min(1)
      .describe('What the provider implements for the type. create and delete are required; without update every change replaces; without observe the type is taken as stored; without adopt, external_id is refused; with signal, the resource takes signals.'),
  })
  .strict()
  .refine((t) => t.operations.includes('create') && t.operations.includes('delete'), { message: 'a type supports create and delete at least' })
  .refine((t) => t.operations.includes('update') || !Object.values(t.properties).some((p) => p.update_allowed || p.immutable), {
    message: 'a property is update_allowed or immutable only for a type that supports update (without it, every change replaces)',
  })

/** `GET /types`. */
export const TypesReply = z
  .object({
    protocol: z.literal(PROTOCOL_VERSION).describe('The protocol version the provider speaks.'),
    types: z.array(TypeDecl).min(1).max(200),
  })
  .strict()

/** The body of every `POST /<operation>`. */
export const ActionRequest = z.object({
  protocol: z.literal(PROTOCOL_VERSION),
  operation: z.enum(OPERATIONS),
  type: z.string().describe('The type\'s own name (without the prefix).'),
  idempotency_key: z.string().describe('The same for every attempt at one action of one resource row in one traversal (retries, a worker\'s death, a resumed long operation): a provider that has seen it answers as it did, and never acts twice.'),
  deadline: z.string().describe('ISO 8601: when Kiln gives up on the action (the stack\'s timeout).'),
  resource: z.object({ stack: z.string(), stack_id: z.string(), name: z.string(), uuid: z.string(), physical_name: z.string(), project_id: z.string() }),
  properties: z.record(z.string(), z.unknown()).describe('create, update: the resolved properties. delete, observe: the stored ones.'),
  previous: z
    .object({ physical_id: z.string().nullable(), properties: z.record(z.string(), z.unknown()), attributes: z.record(z.string(), z.unknown()), data: z.record(z.string(), z.unknown()) })
    .optional()
    .describe('update, delete, observe: what Kiln stored after the last action.'),
  changed: z.array(z.string()).optional().describe('update: the properties that changed.'),
  external_id: z.string().optional().describe('adopt: the id of the object to take over.'),
  dry_run: z.boolean().optional().describe('adopt: answer as adopt would, and change nothing (an import preview).'),
  signal: z
    .object({ status: z.enum(['SUCCESS', 'FAILURE']).optional(), reason: z.string().optional(), data: z.unknown().optional(), id: z.union([z.string(), z.number()]).optional() })
    .optional()
    .describe('signal: what the sender gave (POST …/resources/<name>/signal). Answer 200 to take it, 4xx with an error to refuse it.'),
  callback: z.string().optional().describe('A URL to POST to (an empty body will do) when a long operation this request started has moved on: Kiln then asks again with the same key.'),
})

/** 200 to create, update and adopt. */
export const ActionReply = z
  .object({
    physical_id: z.string().max(1000).optional().describe('What get_resource gives; by default the previous one, then the row\'s physical name.'),
    attributes: z.record(z.string(), z.unknown()).optional(),
    properties: z.record(z.string(), z.unknown()).optional().describe('adopt: the object\'s properties as seen.'),
    data: z.record(z.string(), z.unknown()).optional().describe('Anything the provider wants back in `previous.data` of later requests.'),
  })
  .strict()

/** 200 to observe. */
export const ObserveReply = z.union([
  z.object({ exists: z.literal(false) }).strict(),
  z
    .object({
      exists: z.literal(true),
      properties: z.record(z.string(), z.unknown()).optional().describe('The properties the provider can read back; one left out is not compared.'),
      attributes: z.record(z.string(), z.unknown()).optional(),
      problems: z.array(z.string()).optional().describe('What is wrong beyond the properties, each a sentence for the user.'),
    })
    .strict(),
])

/** 202 to any action: the operation goes on; Kiln asks again with the same key after `retry_after_ms`, or sooner on a callback. */
export const Accepted = z
  .object({
    operation: z.string().max(200).optional().describe('The provider\'s id of the operation, shown on the node while it waits.'),
    retry_after_ms: z.number().int().min(100).max(3_600_000).optional().describe('When to ask again at the latest. Without it Kiln waits for the callback, asking again after a back-off that grows with the time waited (1 s to 60 s).'),
    message: z.string().max(500).optional().describe('Shown on the node while it waits.'),
  })
  .strict()

/** 4xx: the action failed, for the user to read. 409 with replace: true to an update asks for a replacement. */
export const ErrorReply = z
  .object({
    error: z.string().max(4000),
    replace: z.boolean().optional().describe('update only: the change needs a new resource (Heat\'s UpdateReplace).'),
  })
  .passthrough()

export type TypeDeclT = z.infer<typeof TypeDecl>
export type TypesReplyT = z.infer<typeof TypesReply>
export type ActionRequestT = z.infer<typeof ActionRequest>
export type ActionReplyT = z.infer<typeof ActionReply>
export type ObserveReplyT = z.infer<typeof ObserveReply>
export type AcceptedT = z.infer<typeof Accepted>

/** The messages, by name, for the protocol's reference (JSON Schema of each). */
export const MESSAGES = { TypesReply, ActionRequest, ActionReply, ObserveReply, Accepted, ErrorReply } as const
