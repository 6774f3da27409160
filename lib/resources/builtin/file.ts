/**
 * Kiln::File: a file in the project's own workspace,
 * `<KILN_WORKSPACE_DIR>/<project id>/<path>`. A tenant's paths cannot leave
 * it: a path is a plain relative one (no "..", ".", empty names or leading
 * "/", so one file has one key), and no link is ever followed
 * (./workspace.ts).
 *
 * Ownership lives in Kiln's database (outside_object: kind `file`, scope the
 * project, key the path), recorded before the file is touched, never beside
 * the files where a template could write a forged record. A create refuses a
 * path another stack or resource of the project owns, and a file Kiln did not
 * write; it takes over a path its own logical resource owns (a replacement
 * row, or a retry after a worker died mid-create). A delete removes the file
 * only while its own row still owns it, so the cleanup of a replaced row never
 * deletes its successor's file, and then removes the directories it left
 * empty. Writes are atomic (temp file + rename), so a reader never sees half a
 * file and a killed worker never leaves one.
 *
 * Size: a file's content is at most MAX_FILE_BYTES (refused when the template
 * is validated if the content is known then, else when the file is created),
 * and a project's files together at most its workspace quota
 * (KILN_WORKSPACE_QUOTA_BYTES, checked when the file is claimed). API
 * responses show the first SHOWN_CONTENT_BYTES of the content.
 *
 * Attributes: the path relative to the workspace (a tenant never learns where
 * the server keeps its files), and the content's digest and size, which are
 * secret when the content holds a secret (derivedFrom, lib/resources/secrets.ts).
 */
import { createHash } from 'node:crypto'
import { DEFAULT_WORKSPACE_QUOTA_BYTES } from '../types'
import { defineResourceType, ResourceActionError, type Adopted, type Observation, type OutsideRef, type ResourceContext, type ResourceState } from '../../sdk'
import { entryAt, inspectAt, projectWorkspace, removeAt, WorkspaceError, writeAt } from './workspace'

export const MAX_FILE_BYTES = 1024 * 1024
const SHOWN_CONTENT_BYTES = 4096

/** One name of a path: not "." or "..", no "/" or NUL; at most 255 characters (bytes are checked when writing). */
const NAME = '(?!\\.\\.?(?:/|$))[^/\\u0000]{1,255}'

const fileRef = (ctx: ResourceContext, rel: string): OutsideRef => ({ kind: 'file', scope: ctx.projectId, key: rel })

/** A workspace error is the user's to read (it names only the relative path). */
function userError<T>(p: Promise<T>): Promise<T> {
  return p.catch((err: unknown) => {
    throw err instanceof WorkspaceError ? new ResourceActionError(err.message) : err
  })
}

async function write(ctx: ResourceContext, props: Record<string, unknown>) {
  const ws = projectWorkspace(ctx.config.workspaceDir, ctx.projectId)
  const rel = String(props.path)
  const content = Buffer.from(String(props.content ?? ''))
  if (content.length > MAX_FILE_BYTES) throw new ResourceActionError(`${rel}: the content is ${content.length} bytes; at most ${MAX_FILE_BYTES} are allowed`)
  const mode = parseInt(String(props.mode ?? '0644'), 8)
  const ref = fileRef(ctx, rel)

  // A file at the path with no record was not written by Kiln: it is refused before anything is recorded.
  const [record] = await ctx.objects.find([ref])
  if (!record && (await userError(entryAt(ws, rel))) !== null) {
    throw new ResourceActionError(`${rel} already exists and was not written by Kiln; remove it or choose another path`)
  }
  ctx.signal.throwIfAborted()
  const quota = ctx.config.workspaceQuotaBytes ?? DEFAULT_WORKSPACE_QUOTA_BYTES
  const claim = await ctx.objects.claim([ref], { sizeBytes: content.length, quotaBytes: quota })
  switch (claim.outcome) {
    case 'refused':
      throw new ResourceActionError(`${rel} belongs to resource ${claim.owner.resourceName} of stack ${claim.owner.stackId}`)
    case 'busy':
      throw new ResourceActionError(`${rel} is being deleted by an older version of this resource; try again once that is done`)
    case 'over_quota':
      throw new ResourceActionError(
        `${rel}: ${content.length} bytes would take the project's files to ${claim.usedBytes + content.length} bytes, over its workspace quota of ${claim.limitBytes} bytes (KILN_WORKSPACE_QUOTA_BYTES)`,
      )
  }
  await userError(writeAt(ws, rel, content, mode, `${ctx.resourceUuid}.tmp`))
  await ctx.objects.settle([ref], content.length)
  return { physicalId: rel, attributes: fileAttributes(rel, content) }
}

/** Relative to the project's workspace, like the property: where the server keeps its files is not the tenant's to know. */
const fileAttributes = (rel: string, content: Buffer) => ({
  path: rel,
  sha256: createHash('sha256').update(content).digest('hex'),
  size: content.length,
})

/** The path a row's file is at: its stored property, or its physical id (a create that stored nothing). */
const pathOf = (state: ResourceState): string | null => (typeof state.properties.path === 'string' ? state.properties.path : state.physicalId)

/**
 * The file as it is: gone, or its content and mode. A value equal to the
 * stored one is given as stored (the same mode may be written `644` or
 * `0644`); content that differs is read as UTF-8.
 */
async function observe(ctx: ResourceContext, state: ResourceState): Promise<Observation> {
  ctx.signal.throwIfAborted()
  const rel = pathOf(state)
  if (!rel) return { state: 'gone' }
  const ws = projectWorkspace(ctx.config.workspaceDir, ctx.projectId)
  const seen = await userError(inspectAt(ws, rel))
  if (!seen) return { state: 'gone' }
  const storedContent = String(state.properties.content ?? '')
  const storedMode = state.properties.mode === undefined ? undefined : String(state.properties.mode)
  return {
    state: 'exists',
    properties: {
      path: rel,
      content: seen.content.equals(Buffer.from(storedContent)) ? storedContent : seen.content.toString('utf8'),
      mode: storedMode !== undefined && parseInt(storedMode, 8) === seen.mode ? storedMode : `0${seen.mode.toString(8).padStart(3, '0')}`,
    },
    attributes: fileAttributes(rel, seen.content),
  }
}

const PATH_PATTERN = new RegExp(`^${NAME}(?:/${NAME})*$`)

/**
 * Adopt a file of the project's workspace (external_id: its path). Any file
 * there may be adopted (the workspace is the project's own), unless another
 * live resource of the project owns it; its content must be text Kiln::File
 * can hold (UTF-8, at most MAX_FILE_BYTES), or a later update would rewrite it.
 */
async function adopt(ctx: ResourceContext, externalId: string, opts: { dryRun: boolean }): Promise<Adopted> {
  const rel = externalId
  if (!PATH_PATTERN.test(rel) || rel.length > 1024) throw new ResourceActionError(`external_id ${JSON.stringify(rel)}: not a path inside the project's workspace (names separated by single "/", none of them "." or "..", no leading "/")`)
  const seen = await observe(ctx, { physicalId: rel, properties: { path: rel }, attributes: {}, data: {} })
  if (seen.state === 'gone') throw new ResourceActionError(`external_id ${rel}: there is no file at that path in the project's workspace`)
  const size = Number(seen.attributes?.size)
  if (size > MAX_FILE_BYTES) throw new ResourceActionError(`external_id ${rel}: the file is ${size} bytes; Kiln::File holds at most ${MAX_FILE_BYTES}`)
  if (Buffer.byteLength(String(seen.properties.content)) !== size) throw new ResourceActionError(`external_id ${rel}: the file is not UTF-8 text, which Kiln::File holds`)
  const out = await ctx.objects.adopt([fileRef(ctx, rel)], { unrecorded: true, dryRun: opts.dryRun, sizeBytes: size })
  switch (out.outcome) {
    case 'refused':
      throw new ResourceActionError(`${rel} belongs to resource ${out.owner.resourceName} of stack ${out.owner.stackId}`)
    case 'busy':
      throw new ResourceActionError(`${rel} is being acted on by an older version of this resource; try again once that is done`)
    case 'unrecorded':
      throw new ResourceActionError(`${rel} cannot be adopted`)
  }
  return { physicalId: rel, properties: seen.properties, attributes: seen.attributes ?? {} }
}

async function remove(ctx: ResourceContext, state: ResourceState): Promise<void> {
  const rel = pathOf(state)
  if (!rel) return
  const ref = fileRef(ctx, rel)
  const mine = await ctx.objects.startDelete([ref])
  if (!mine.length) return // gone, or a successor owns it now
  const ws = projectWorkspace(ctx.config.workspaceDir, ctx.projectId)
  const outcome = await userError(removeAt(ws, rel))
  if (outcome === 'not-followed') ctx.log.warn(`${rel}: a parent directory is a symbolic link now; the file was not removed through it`)
  await ctx.objects.forget([ref])
}

export const fileResource = defineResourceType({
  name: 'Kiln::File',
  description: "A file in the project's workspace (KILN_WORKSPACE_DIR/<project id>). Changing the path replaces it; content and mode update in place.",
  properties: {
    path: {
      type: 'string',
      required: true,
      description: "Path relative to the project's workspace, e.g. `app/config.json`.",
      constraints: [
        { allowed_pattern: `${NAME}(?:/${NAME})*`, description: 'a relative path inside the workspace: names separated by single "/", none of them "." or "..", no leading "/"' },
        { length: { max: 1024 } },
      ],
    },
    content: {
      type: 'string',
      default: '',
      updateAllowed: true,
      description: `The file content (at most ${MAX_FILE_BYTES} bytes).`,
      constraints: [{ bytes: { max: MAX_FILE_BYTES }, description: `the content may be at most ${MAX_FILE_BYTES} bytes` }],
      shownUpToBytes: SHOWN_CONTENT_BYTES,
    },
    mode: { type: 'string', default: '0644', updateAllowed: true, constraints: [{ allowed_pattern: '0?[0-7]{3}', description: 'an octal file mode such as 0644' }], description: 'File mode (octal).' },
  },
  attributes: {
    path: { description: "Path of the file relative to the project's workspace (the `path` property).", type: 'string', derivedFrom: ['path'] },
    sha256: { description: 'SHA-256 of the content (hex).', type: 'string', derivedFrom: ['content'] },
    size: { description: 'Size of the content in bytes.', type: 'integer', derivedFrom: ['content'] },
  },
  create: write,
  async update(ctx, props) {
    return write(ctx, props)
  },
  delete: remove,
  // A stack check observes the file (gone, or changed outside Kiln, fails it): nothing more to check.
  observe,
  // The file is there: writing it again repairs whatever a failed or interrupted action left.
  needsReplaceFailed: () => null,
  adopt,
})
