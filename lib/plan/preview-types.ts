/**
 * What a preview (and a saved plan) says an update will do: the format of
 * `POST /api/stacks/{id}/preview` and of a plan's `preview`. The zod schemas
 * are the definition: the types are inferred from them and the OpenAPI
 * document is generated from them. Shared by the API, the CLI and the UI
 * (type-only imports).
 */
import { z } from 'zod'

const valueChangeFields = {
  path: z.string().describe("Where the value differs: `value`, `action_wait_secs.create`, `networks[0].port`; '' for a whole value (an output)."),
  before: z.unknown().optional().describe('The value before; absent when there was none.'),
  after: z.unknown().optional().describe('The value after; absent when there will be none, or when it is known only after apply.'),
  beforeUnknown: z.literal(true).optional().describe('The value before is known only once the running update has set it.'),
  afterUnknown: z.literal(true).optional().describe('The value after is known only after apply (it depends on a resource this update creates, replaces or updates).'),
}
export const ValueChangeSchema = z.object(valueChangeFields)

export const PropertyChangeSchema = z.object({
  ...valueChangeFields,
  forcesReplacement: z.literal(true).optional().describe('The type cannot update this property in place.'),
})

export const PreviewActionSchema = z.enum(['create', 'update', 'replace', 'delete', 'unchanged'])

export const PreviewItemSchema = z.object({
  name: z.string().describe("The resource's name."),
  type: z.string().describe('The type after the update (before it, for a delete).'),
  action: PreviewActionSchema.describe('What the update does to it.'),
  certain: z.boolean().describe('false: the action depends on a value known only after apply ("may update", "may replace"); an uncertain item is never shown as unchanged.'),
  reason: z.string().optional().describe("Why it is created, replaced or deleted (the engine's words), or what it depends on."),
  fromType: z.string().optional().describe('The type before, when the update changes it.'),
  changed: z.array(z.string()).optional().describe('Top-level properties that change, or may.'),
  changes: z.array(PropertyChangeSchema).optional().describe('Before → after, leaf by leaf; secrets masked, unknown values marked.'),
  moreChanges: z.number().int().min(1).optional().describe('How many further changes were left out of `changes`.'),
  olderRows: z.number().int().min(1).optional().describe('Older rows of this name (left by earlier replacements) that the update also removes.'),
  pending: z.literal(true).optional().describe("A running update has not reached this resource yet: it is compared with what that update makes of it."),
})

export const OutputChangeSchema = z.object({
  name: z.string(),
  action: z.enum(['create', 'update', 'delete', 'unchanged']),
  certain: z.boolean(),
  changes: z.array(ValueChangeSchema).optional(),
  error: z.string().optional().describe('The new value cannot be computed.'),
})

export const ConditionChangeSchema = z.object({
  name: z.string(),
  before: z.boolean().nullable().describe('null: the condition is not in that template.'),
  after: z.boolean().nullable(),
})

const count = z.number().int().min(0)

export const PreviewResultSchema = z.object({
  stack: z.object({ id: z.string(), name: z.string() }),
  against: z
    .object({ templateId: z.string().nullable(), traversalId: z.string().nullable(), inFlight: z.boolean() })
    .describe("What the preview compares against: the stack's template and traversal (the running one's target when `inFlight`)."),
  items: z.array(PreviewItemSchema).describe('Resources in dependency order, then the ones deleted.'),
  outputs: z.array(OutputChangeSchema),
  conditions: z.array(ConditionChangeSchema),
  summary: z
    .object({ create: count, update: count, replace: count, delete: count, unchanged: count, uncertain: count })
    .describe('Items per action; `uncertain` counts those whose action is not certain.'),
})

export type ValueChange = z.infer<typeof ValueChangeSchema>
export type PropertyChange = z.infer<typeof PropertyChangeSchema>
export type PreviewAction = z.infer<typeof PreviewActionSchema>
export type PreviewItem = z.infer<typeof PreviewItemSchema>
export type OutputChange = z.infer<typeof OutputChangeSchema>
export type ConditionChange = z.infer<typeof ConditionChangeSchema>
export type PreviewResult = z.infer<typeof PreviewResultSchema>
