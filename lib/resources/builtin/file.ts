/**
 * Kiln::File: a file in the configured workspace directory.
 *
 * Ownership: beside the files, `.kiln/owners/<path>.json` records which
 * resource row (stack, resource name, row uuid) wrote each file. A create
 * refuses a path another stack or resource owns; it takes over a path its
 * own logical resource owns (a replacement row, or a retry after a worker
 * died mid-create). A delete removes the file only while its own row still
 * owns it, so the cleanup of a replaced row never deletes its successor's
 * file. Writes are atomic (temp file + rename), so a reader never sees half a
 * file and a killed worker never leaves one.
 */
import { createHash, randomUUID } from 'node:crypto'
import { promises as fs } from 'node:fs'
import path from 'node:path'
import { ResourceActionError, type ResourceContext, type ResourceState, type ResourceType } from '../types'

interface Owner {
  stackId: string
  resource: string
  uuid: string
}

function resolveIn(workspace: string, rel: string): string {
  const abs = path.resolve(workspace, rel)
  if (path.isAbsolute(rel) || !abs.startsWith(path.resolve(workspace) + path.sep)) throw new ResourceActionError(`path "${rel}" must stay inside the workspace`)
  return abs
}

const ownerFile = (workspace: string, rel: string) => path.join(workspace, '.kiln', 'owners', `${rel}.json`)

async function readOwner(workspace: string, rel: string): Promise<Owner | null> {
  try {
    return JSON.parse(await fs.readFile(ownerFile(workspace, rel), 'utf8')) as Owner
  } catch {
    return null
  }
}

async function atomicWrite(workspace: string, target: string, content: string, mode?: number): Promise<void> {
  const tmpDir = path.join(workspace, '.kiln', 'tmp')
  await fs.mkdir(tmpDir, { recursive: true })
  await fs.mkdir(path.dirname(target), { recursive: true })
  const tmp = path.join(tmpDir, randomUUID())
  await fs.writeFile(tmp, content, mode !== undefined ? { mode } : {})
  if (mode !== undefined) await fs.chmod(tmp, mode)
  await fs.rename(tmp, target)
}

async function write(ctx: ResourceContext, props: Record<string, unknown>) {
  const workspace = ctx.config.workspaceDir
  const rel = String(props.path)
  const abs = resolveIn(workspace, rel)
  const owner = await readOwner(workspace, rel)
  if (owner && (owner.stackId !== ctx.stackId || owner.resource !== ctx.resourceName)) {
    throw new ResourceActionError(`${rel} is managed by resource ${owner.resource} of another stack or resource (${owner.stackId})`)
  }
  if (!owner) {
    const exists = await fs.stat(abs).then(() => true, () => false)
    if (exists) throw new ResourceActionError(`${rel} already exists and is not managed by Kiln; remove it or choose another path`)
  }
  ctx.signal.throwIfAborted()
  const content = String(props.content ?? '')
  const mode = parseInt(String(props.mode ?? '0644'), 8)
  // The ownership record goes first: if the worker dies between the two writes, a retry
  // (same stack and resource) takes the path over instead of finding an unowned file.
  await atomicWrite(workspace, ownerFile(workspace, rel), JSON.stringify({ stackId: ctx.stackId, resource: ctx.resourceName, uuid: ctx.resourceUuid } satisfies Owner), 0o600)
  await atomicWrite(workspace, abs, content, mode)
  return {
    physicalId: rel,
    attributes: { path: abs, sha256: createHash('sha256').update(content).digest('hex'), size: Buffer.byteLength(content) },
  }
}

async function remove(ctx: ResourceContext, state: ResourceState): Promise<void> {
  const rel = typeof state.properties.path === 'string' ? state.properties.path : state.physicalId
  if (!rel) return
  const workspace = ctx.config.workspaceDir
  const owner = await readOwner(workspace, rel)
  if (!owner || owner.uuid !== ctx.resourceUuid) return // gone, or a successor owns it now
  await fs.rm(resolveIn(workspace, rel), { force: true })
  await fs.rm(ownerFile(workspace, rel), { force: true })
}

export const fileResource: ResourceType = {
  name: 'Kiln::File',
  description: 'A file in the workspace directory (KILN_WORKSPACE_DIR). Changing the path replaces it; content and mode update in place.',
  properties: {
    path: {
      type: 'string',
      required: true,
      description: 'Path relative to the workspace, e.g. `app/config.json`.',
      constraints: [{ allowed_pattern: '(?!/)(?!.*(^|/)\\.\\.(/|$))(?!\\.kiln(/|$))[^\\0]+', description: 'a relative path inside the workspace, without ".." and not under .kiln' }, { length: { max: 1024 } }],
    },
    content: { type: 'string', default: '', updateAllowed: true, description: 'The file content.' },
    mode: { type: 'string', default: '0644', updateAllowed: true, constraints: [{ allowed_pattern: '0?[0-7]{3}', description: 'an octal file mode such as 0644' }], description: 'File mode (octal).' },
  },
  attributes: {
    path: { description: 'Absolute path of the file.', type: 'string' },
    sha256: { description: 'SHA-256 of the content.', type: 'string' },
    size: { description: 'Size in bytes.', type: 'integer' },
  },
  create: write,
  async update(ctx, props) {
    return write(ctx, props)
  },
  delete: remove,
  async check(ctx, state) {
    const rel = String(state.properties.path)
    const content = await fs.readFile(resolveIn(ctx.config.workspaceDir, rel), 'utf8').catch(() => null)
    if (content === null) throw new ResourceActionError(`${rel} no longer exists`)
    if (content !== String(state.properties.content ?? '')) throw new ResourceActionError(`${rel} was changed outside Kiln`)
  },
}
