/**
 * Files inside one project's workspace (`<workspace dir>/<project id>/`),
 * never through a symbolic link: every parent of a path is checked with
 * lstat (a link or a non-directory is refused, a missing one is made), the
 * parent's realpath must then be exactly where the walk went (so a parent
 * swapped for a link after its check is caught), and files are opened with
 * O_NOFOLLOW. Writes are atomic: a temp file in the workspace's private
 * `.kiln-tmp` directory (beside the project directories, so a tenant's paths
 * never reach it; named after the row, so its name never exceeds NAME_MAX and
 * a retry reuses it), renamed into place; a failed write removes it.
 *
 * Errors are WorkspaceErrors naming the path relative to the project's
 * workspace: a tenant never sees where the server keeps its files.
 */
import { constants, promises as fs, type Stats } from 'node:fs'
import path from 'node:path'

const NAME_MAX = 255

export class WorkspaceError extends Error {
  override name = 'WorkspaceError'
}

export interface ProjectWorkspace {
  /** The project's directory: every path is relative to it. */
  root: string
  /** Kiln's temp files, outside every project's directory. */
  tmp: string
}

export function projectWorkspace(workspaceDir: string, projectId: string): ProjectWorkspace {
  return { root: path.join(workspaceDir, projectId), tmp: path.join(workspaceDir, '.kiln-tmp') }
}

const REASONS: Record<string, string> = {
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  ENOSPC: 'no space left on the device',
  EDQUOT: 'disk quota exceeded',
  EROFS: 'the file system is read-only',
  EISDIR: 'is a directory',
  ENOTDIR: 'a parent is not a directory',
  ENAMETOOLONG: 'a name in the path is too long',
  ELOOP: 'is a symbolic link; Kiln never follows links',
  EXDEV: 'crosses a file system boundary',
  EMFILE: 'too many open files on the server',
}

/** A file-system error as the tenant may see it: the relative path and the reason, never the server's path. */
function failure(err: unknown, rel: string): WorkspaceError {
  if (err instanceof WorkspaceError) return err
  const code = (err as NodeJS.ErrnoException | null)?.code
  return new WorkspaceError(`${rel}: ${(code && REASONS[code]) ?? `file system error${code ? ` ${code}` : ''}`}`)
}

async function lstatOrNull(p: string): Promise<Stats | null> {
  try {
    return await fs.lstat(p)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw err
  }
}

/** The names of a path the schema validated (no leading '/', no '', '.' or '..'); each at most NAME_MAX bytes. */
function names(rel: string): string[] {
  const parts = rel.split('/')
  if (parts.some((p) => p === '' || p === '.' || p === '..' || p.includes('\0'))) throw new WorkspaceError(`${rel}: not a normalised relative path`)
  const long = parts.find((p) => Buffer.byteLength(p) > NAME_MAX)
  if (long !== undefined) throw new WorkspaceError(`${rel}: the name "${long.slice(0, 40)}…" is ${Buffer.byteLength(long)} bytes; at most ${NAME_MAX} are allowed`)
  return parts
}

/** The project's directory, made if missing; never a link. */
async function rootDir(ws: ProjectWorkspace, create: boolean): Promise<boolean> {
  if (create) await fs.mkdir(path.dirname(ws.root), { recursive: true })
  let st = await lstatOrNull(ws.root)
  if (!st && create) {
    await fs.mkdir(ws.root).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err
    })
    st = await lstatOrNull(ws.root)
  }
  if (!st) return false
  if (!st.isDirectory()) throw new WorkspaceError("the project's workspace is not a directory")
  return true
}

/**
 * The directory holding `parts`' last name, checked name by name from the
 * project's root (made where missing when `create`); null when a parent does
 * not exist and `create` is false.
 */
async function parentDir(ws: ProjectWorkspace, parts: string[], create: boolean): Promise<string | null> {
  if (!(await rootDir(ws, create))) return null
  let dir = ws.root
  for (let i = 0; i < parts.length - 1; i++) {
    const next = path.join(dir, parts[i]!)
    const shown = parts.slice(0, i + 1).join('/')
    let st = await lstatOrNull(next)
    if (!st && create) {
      await fs.mkdir(next).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err
      })
      st = await lstatOrNull(next)
    }
    if (!st) return null
    if (st.isSymbolicLink()) throw new WorkspaceError(`${shown} is a symbolic link; Kiln never follows links`)
    if (!st.isDirectory()) throw new WorkspaceError(`${shown} is not a directory`)
    dir = next
  }
  const expected = path.join(await fs.realpath(ws.root), ...parts.slice(0, -1))
  const real = await fs.realpath(dir).catch((err: NodeJS.ErrnoException) => {
    // A delete in the same project removed a directory it left empty after our walk: the path is gone
    // (a walk that makes directories is walked again by its caller).
    if (err.code === 'ENOENT' && !create) return null
    throw err
  })
  if (real === null) return null
  if (real !== expected) throw new WorkspaceError(`${parts.slice(0, -1).join('/')} changed into a link while it was checked`)
  return dir
}

/** Remove the parents of `parts` that are empty now, deepest first, up to the project's root. */
async function removeEmptyParents(ws: ProjectWorkspace, parts: string[]): Promise<void> {
  // rmdir never follows a link (ENOTDIR) and stops at the first directory still in use (ENOTEMPTY).
  for (let i = parts.length - 1; i >= 1; i--) {
    const ok = await fs.rmdir(path.join(ws.root, ...parts.slice(0, i))).then(() => true, () => false)
    if (!ok) break
  }
}

/** What is at `rel` now, without following links: null when nothing is there. */
export async function entryAt(ws: ProjectWorkspace, rel: string): Promise<'file' | 'other' | null> {
  try {
    const parts = names(rel)
    const dir = await parentDir(ws, parts, false)
    if (!dir) return null
    const st = await lstatOrNull(path.join(dir, parts.at(-1)!))
    return st === null ? null : st.isFile() ? 'file' : 'other'
  } catch (err) {
    throw failure(err, rel)
  }
}

/** Write `content` to `rel` atomically with `mode`; `tmpName` (at most NAME_MAX bytes) names the temp file. */
export async function writeAt(ws: ProjectWorkspace, rel: string, content: Buffer, mode: number, tmpName: string): Promise<void> {
  const tmp = path.join(ws.tmp, tmpName)
  try {
    const parts = names(rel)
    await fs.mkdir(ws.tmp, { recursive: true, mode: 0o700 })
    const fh = await fs.open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o600)
    try {
      await fh.writeFile(content)
      await fh.chmod(mode) // exactly `mode`, whatever the umask
    } finally {
      await fh.close()
    }
    // A delete in the same project may remove a directory it left empty while we walk, or
    // between the walk and the rename (ENOENT): walk again, making it anew.
    for (let attempt = 1; ; attempt++) {
      try {
        const dir = await parentDir(ws, parts, true)
        if (dir === null) throw Object.assign(new Error('a parent directory was removed while it was made'), { code: 'ENOENT' })
        const target = path.join(dir, parts.at(-1)!)
        const st = await lstatOrNull(target)
        if (st?.isSymbolicLink()) throw new WorkspaceError(`${rel} is a symbolic link; Kiln never follows links`)
        if (st && !st.isFile()) throw new WorkspaceError(`${rel} exists and is not a regular file`)
        // rename() replaces what is at `target` and never writes through a link there.
        await fs.rename(tmp, target)
        return
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || attempt >= 5) throw err
      }
    }
  } catch (err) {
    await fs.rm(tmp, { force: true }).catch(() => {})
    throw failure(err, rel)
  }
}

/**
 * The content and permission bits of the regular file at `rel` (one open, with
 * O_NOFOLLOW: a link is never followed), or null when nothing is there; it
 * makes nothing, not even a missing parent directory.
 */
export async function inspectAt(ws: ProjectWorkspace, rel: string): Promise<{ content: Buffer; mode: number } | null> {
  try {
    const parts = names(rel)
    const dir = await parentDir(ws, parts, false)
    if (!dir) return null
    const fh = await fs.open(path.join(dir, parts.at(-1)!), constants.O_RDONLY | constants.O_NOFOLLOW).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return null
      throw err
    })
    if (!fh) return null
    try {
      const st = await fh.stat()
      if (!st.isFile()) throw new WorkspaceError(`${rel} is not a regular file`)
      return { content: await fh.readFile(), mode: st.mode & 0o777 }
    } finally {
      await fh.close()
    }
  } catch (err) {
    throw failure(err, rel)
  }
}

/**
 * Remove the regular file at `rel` (a link or anything else there is left
 * alone), then every directory the removal left empty, up to the project's
 * root. `not-followed`: a parent is a link now, so the file Kiln wrote is not
 * reachable without following it, and nothing was removed.
 */
export async function removeAt(ws: ProjectWorkspace, rel: string): Promise<'removed' | 'absent' | 'not-followed'> {
  try {
    const parts = names(rel)
    let dir: string | null
    try {
      dir = await parentDir(ws, parts, false)
    } catch (err) {
      if (err instanceof WorkspaceError) return 'not-followed'
      throw err
    }
    if (!dir) return 'absent'
    const target = path.join(dir, parts.at(-1)!)
    const st = await lstatOrNull(target)
    const removed = st?.isFile() === true
    if (removed) {
      await fs.unlink(target).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err
      })
    }
    await removeEmptyParents(ws, parts)
    return removed ? 'removed' : 'absent'
  } catch (err) {
    throw failure(err, rel)
  }
}

/** The directory at `rel`, made (with its parents) where missing, never through a link: its absolute path. */
export async function dirAt(ws: ProjectWorkspace, rel: string): Promise<string> {
  try {
    const parts = names(rel)
    const dir = await parentDir(ws, parts, true)
    if (dir === null) throw new WorkspaceError(`${rel}: a parent directory was removed while it was made`)
    const target = path.join(dir, parts.at(-1)!)
    await fs.mkdir(target).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err
    })
    const st = await fs.lstat(target)
    if (!st.isDirectory()) throw new WorkspaceError(`${rel} is not a directory`)
    return target
  } catch (err) {
    throw failure(err, rel)
  }
}

/**
 * Remove the directory at `rel` and everything in it (links are removed,
 * never followed), then every directory that left empty, up to the
 * project's root. Nothing there: nothing to do.
 */
export async function removeDirAt(ws: ProjectWorkspace, rel: string): Promise<void> {
  try {
    const parts = names(rel)
    const dir = await parentDir(ws, parts, false)
    if (!dir) return
    const target = path.join(dir, parts.at(-1)!)
    const st = await lstatOrNull(target)
    if (!st) return
    if (!st.isDirectory()) throw new WorkspaceError(`${rel} is not a directory`)
    await fs.rm(target, { recursive: true, force: true })
    await removeEmptyParents(ws, parts)
  } catch (err) {
    throw failure(err, rel)
  }
}
