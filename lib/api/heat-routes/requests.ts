/**
 * Heat's request bodies read into Kiln's: a submission (template,
 * environment, parameters, settings) and the fields only an update takes.
 * Inputs Kiln cannot honour are refused with a 400 naming them, never
 * ignored.
 */
import { fail } from './common'

/** A create's or an update's template, environment, parameters and settings. */
export function submission(b: Record<string, unknown>) {
  const template = b.template ?? (typeof b.template_url === 'string' ? fail('template_url is not supported: send the template itself') : undefined)
  // Inputs Kiln cannot honour are refused, never ignored.
  if (b.files_container !== undefined && b.files_container !== null) fail('files_container is not supported: Kiln has no Swift to read files from; send the template and environment themselves')
  if (b.adopt_stack_data !== undefined && b.adopt_stack_data !== null) fail("adopt_stack_data (Heat's stack adopt) is not supported: give the resources to adopt an external_id and import them (POST /api/import)")
  const environment = (b.environment ?? undefined) as Record<string, unknown> | string | undefined
  const files = b.files as Record<string, unknown> | undefined
  if (files && Object.keys(files).length && environment && typeof environment === 'object' && environment.resource_registry) {
    // heatclient sends nested templates as files; Kiln has no nested stacks.
    for (const v of Object.values(environment.resource_registry as Record<string, unknown>)) if (typeof v === 'string' && v in files) fail('nested stacks (templates in files) are not supported')
  }
  return {
    ...(template !== undefined ? { template: typeof template === 'string' || (typeof template === 'object' && template !== null) ? (template as string | Record<string, unknown>) : fail('template must be a map or a string') } : {}),
    ...(environment !== undefined ? { environment } : {}),
    ...(b.parameters ? { parameters: b.parameters as Record<string, unknown> } : {}),
    ...(typeof b.timeout_mins === 'number' ? { timeoutMins: b.timeout_mins } : {}),
    ...(typeof b.disable_rollback === 'boolean' ? { disableRollback: b.disable_rollback } : {}),
  }
}

/** Heat's boolean body fields: a JSON boolean, or the strings true/false (Heat's extract_bool); anything else is a 400 naming the field. */
function flag(b: Record<string, unknown>, key: string): boolean | undefined {
  const v = b[key]
  if (v === undefined || v === null) return undefined
  if (typeof v === 'boolean') return v
  if (typeof v === 'string' && /^(true|false)$/i.test(v)) return v.toLowerCase() === 'true'
  return fail(`${key} must be true or false (got ${JSON.stringify(v)})`)
}

/** Heat's tags: a list of strings, or one comma-separated string (as heatclient sends them). */
function tagsOf(b: Record<string, unknown>): string[] | undefined {
  const t = b.tags
  if (t === undefined || t === null) return undefined
  if (typeof t === 'string') return t.split(',').map((s) => s.trim()).filter(Boolean)
  if (Array.isArray(t) && t.every((s) => typeof s === 'string')) return t as string[]
  return fail('tags must be a list of strings or a comma-separated string')
}

/**
 * The fields only an update takes (converge, tags, clear_parameters on a PATCH), refused where they would be
 * ignored: on a preview, which changes and observes nothing, and clear_parameters on a PUT, which reuses no
 * stored parameters.
 */
export function updateOnly(b: Record<string, unknown>, how: { preview: boolean; reusesParameters: boolean }) {
  const converge = flag(b, 'converge')
  const tags = tagsOf(b)
  const clear = b.clear_parameters
  if (clear !== undefined && clear !== null && !(Array.isArray(clear) && clear.every((s) => typeof s === 'string'))) fail('clear_parameters must be a list of parameter names')
  const clearParameters = (clear as string[] | undefined | null) ?? undefined
  if (how.preview) {
    if (converge) fail('converge: a preview does not observe resources; run a drift check (POST /api/stacks/{stack}/drift) to see what converge would bring back')
    if (tags) fail('tags: a preview changes no tags; send them with the update itself')
  }
  if (!how.reusesParameters && clearParameters?.length) fail('clear_parameters: an update with a new template reuses no stored parameters; clear them with PATCH (openstack stack update --existing --clear-parameter)')
  return { ...(converge ? { converge } : {}), ...(tags ? { tags } : {}), ...(clearParameters?.length ? { clearParameters } : {}) }
}
