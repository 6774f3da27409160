/** Request bodies of Kiln's REST API: validated once, at the boundary, and published in the OpenAPI document. */
import { z } from 'zod'

const templateField = z.union([z.string().max(64 << 20), z.record(z.string(), z.unknown())])
const submission = {
  template: templateField,
  environment: z.union([z.string(), z.record(z.string(), z.unknown())]).optional(),
  parameters: z.record(z.string(), z.unknown()).optional(),
}
export const CreateBody = z.object({
  name: z.string().min(1).max(255),
  ...submission,
  timeoutMins: z.number().int().min(1).max(7 * 24 * 60).optional(),
  disableRollback: z.boolean().optional(),
  tags: z.array(z.string().max(80)).max(50).optional(),
}).strict()
const updateFields = {
  template: templateField.optional(),
  environment: submission.environment,
  parameters: submission.parameters,
  existing: z.boolean().optional(),
  timeoutMins: z.number().int().min(1).max(7 * 24 * 60).optional(),
  disableRollback: z.boolean().optional(),
  /** Heat's clear_parameters (with the stored parameters reused: PATCH, or existing): these take their defaults again. */
  clearParameters: z.array(z.string().min(1).max(255)).max(1000).optional(),
}
/** Fields an update honours that a preview or a plan cannot (the routes refuse them there by name). */
const updateOnlyFields = {
  /** Heat's `--converge`: observe every resource and bring back whatever drifted, even where the template did not change. */
  converge: z.boolean().optional(),
  /** Abort the superseded operation's in-flight actions on the resources whose targets this update changes. */
  preempt: z.boolean().optional(),
  /** The stack's tags from now on (omitted: kept). */
  tags: z.array(z.string().max(80)).max(50).optional(),
}
/** A preview or a plan: what an update would be. */
export const PreviewBody = z.object(updateFields).strict()
export const UpdateBody = z.object({
  ...updateFields,
  ...updateOnlyFields,
  /** The version the edit was written against: a traversal id or a template id of the stack (or send If-Match). */
  expect: z.string().min(1).max(100).optional(),
  /** Start an update even when the submission is what the stack already converges to. */
  force: z.boolean().optional(),
}).strict()
/** The names a preview refuses with a reason, rather than as unknown keys. */
export const UPDATE_ONLY_FIELDS = Object.keys(updateOnlyFields) as (keyof typeof updateOnlyFields)[]
/** An import: the stack to adopt into (created, or updated if the project has one of that name) and a template whose resources carry external_id. */
export const ImportBody = z.object({
  name: z.string().min(1).max(255),
  ...submission,
  timeoutMins: z.number().int().min(1).max(7 * 24 * 60).optional(),
  disableRollback: z.boolean().optional(),
}).strict()
/** A signal to a wait condition handle, as Heat takes it (every key optional; status SUCCESS by default). */
export const SignalBody = z
  .object({
    status: z.enum(['SUCCESS', 'FAILURE']).optional(),
    reason: z.string().max(4096).optional(),
    data: z.unknown().optional(),
    id: z.union([z.string().min(1).max(255), z.number().int()]).optional(),
    // Heat's hook clear: {"unset_hook": "pre-create"}, alone (lib/template/hooks.ts).
    unset_hook: z.string().max(64).optional(),
  })
  .strict()
  .refine((b) => b.unset_hook === undefined || Object.keys(b).length === 1, { message: 'unset_hook clears a hook and takes no other field', path: ['unset_hook'] })
export const CancelBody = z.object({ rollback: z.boolean().default(true) }).strict()
export const ValidateBody = z.object({ ...submission, strict: z.boolean().optional() }).strict()
export const LoginBody = z.object({ token: z.string().min(1).max(200) }).strict()
export const TokenBody = z.object({ name: z.string().min(1).max(80), expiresInDays: z.number().int().min(1).max(3650).nullable().optional() }).strict()
export const ProjectBody = z.object({ name: z.string().min(1).max(63) }).strict()
export const ProviderBody = z
  .object({
    name: z.string().regex(/^[a-z0-9][a-z0-9_.-]{0,62}$/, 'lower-case letters, digits, _ . and -, starting with a letter or digit (at most 63)'),
    url: z
      .string()
      .max(2000)
      .url()
      .refine((u) => /^https?:\/\//.test(u), 'an http:// or https:// URL')
      .refine((u) => !new URL(u).username && !new URL(u).password, 'no user name or password in the URL (requests are signed with the secret)')
      .refine((u) => !new URL(u).search && !new URL(u).hash, 'no query or fragment: the URL is a base that paths are added to'),
    prefix: z.string().max(50).regex(/^[A-Z][A-Za-z0-9]*(?:::[A-Z][A-Za-z0-9]*)*$/, 'words of letters and digits, each starting with a capital, joined by :: (e.g. Acme or Acme::Storage)'),
    secret: z.string().min(16, 'at least 16 characters').max(200).optional(),
    scope: z.enum(['project', 'global']).optional(),
  })
  .strict()

