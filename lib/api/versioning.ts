/**
 * The ETag of a stack (its template version) and how an update names the
 * version it was written against: `expect` in the body, or `If-Match` with
 * that ETag. Both are accepted; when both are given they must agree.
 */
import type { UpdateGuard } from '../services/edit-guard'
import { HttpError } from './http'

export const stackEtag = (templateId: string) => `"${templateId}"`

/** The `expect` of an update request (nothing when neither is given, or `If-Match: *`). */
export function expectedFrom(bodyExpect: string | undefined, ifMatch: string | null): Pick<UpdateGuard, 'expect' | 'expectFrom'> {
  let header: string | undefined
  if (ifMatch !== null && ifMatch.trim() !== '*') {
    const m = /^\s*(?:W\/)?"([^"]*)"\s*$/.exec(ifMatch)
    if (!m) throw new HttpError(400, 'invalid_header', 'If-Match takes one entity tag, as GET /api/stacks/{id} returns it in ETag (a quoted template id), or *')
    header = m[1]
  }
  if (bodyExpect !== undefined && header !== undefined && bodyExpect !== header) {
    throw new HttpError(400, 'invalid_header', `If-Match (${header}) and body.expect (${bodyExpect}) name different versions; send one`)
  }
  if (bodyExpect !== undefined) return { expect: bodyExpect, expectFrom: 'body.expect' }
  if (header !== undefined) return { expect: header, expectFrom: 'If-Match' }
  return {}
}
