/** Template validation as both APIs answer it (`POST /api/templates/validate`, Heat's `POST /v1/{project}/validate`). */
import type { z } from 'zod'
import { typeCatalog } from '../resources/registry'
import { checkSubmission } from '../services/templates'
import type { ApiDeps } from './deps'
import type { ValidateBody } from './schemas'

/** Validate a template for the editor: parameters without a value are fine here (the form asks for them) unless `strict`. */
export function validateLeniently(d: ApiDeps, b: z.infer<typeof ValidateBody>) {
  return checkSubmission(b, {
    catalog: typeCatalog(d.registry),
    limits: d.limits,
    stackName: 'validate',
    allowMissingParameters: b.strict !== true,
  })
}
