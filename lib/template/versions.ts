/**
 * heat_template_version: the dates Heat accepts (with their release names)
 * and which functions and sections each brings (heat/engine/hot/template.py,
 * the HOTemplate20xx classes).
 */

export const VERSIONS: { date: string; name?: string }[] = [
  { date: '2013-05-23' },
  { date: '2014-10-16' },
  { date: '2015-04-30' },
  { date: '2015-10-15' },
  { date: '2016-04-08' },
  { date: '2016-10-14', name: 'newton' },
  { date: '2017-02-24', name: 'ocata' },
  { date: '2017-09-01', name: 'pike' },
  { date: '2018-03-02', name: 'queens' },
  { date: '2018-08-31', name: 'rocky' },
  { date: '2021-04-16', name: 'wallaby' },
]

/** The date form of a version (release names map to their date), or null if unknown. */
export function normaliseVersion(v: unknown): string | null {
  if (v instanceof Date) v = v.toISOString().slice(0, 10)
  if (typeof v !== 'string') return null
  const hit = VERSIONS.find((x) => x.date === v || x.name === v)
  return hit?.date ?? null
}

/** First version each function is available in. */
export const FUNCTION_SINCE: Record<string, string> = {
  get_param: '2013-05-23',
  get_resource: '2013-05-23',
  get_attr: '2013-05-23',
  list_join: '2013-05-23',
  str_replace: '2013-05-23',
  repeat: '2015-04-30',
  digest: '2015-04-30',
  str_split: '2015-10-15',
  map_merge: '2015-10-15',
  map_replace: '2016-04-08',
  if: '2016-10-14',
  equals: '2016-10-14',
  not: '2016-10-14',
  and: '2016-10-14',
  or: '2016-10-14',
  filter: '2017-02-24',
  str_replace_strict: '2017-02-24',
  list_concat: '2017-09-01',
  list_concat_unique: '2017-09-01',
  contains: '2017-09-01',
  make_url: '2017-09-01',
  str_replace_vstrict: '2018-03-02',
}

/** Functions Heat has that Kiln does not evaluate: a clear error rather than silent data. */
export const UNSUPPORTED_FUNCTIONS: Record<string, string> = {
  yaql: 'yaql expressions are not supported by Kiln',
  get_file: 'get_file is not supported: put the content in the template or a parameter',
  resource_facade: 'resource_facade is only meaningful in provider templates, which Kiln does not support',
}

/** The `conditions` section and `condition` keys. */
export const CONDITIONS_SINCE = '2016-10-14'
/** A resource's `external_id` (Heat's HOT 2016-10-14). */
export const EXTERNAL_ID_SINCE = '2016-10-14'

export function available(name: string, version: string): boolean {
  const since = FUNCTION_SINCE[name]
  return since !== undefined && version >= since
}

export function isFunctionName(name: string): boolean {
  return name in FUNCTION_SINCE || name in UNSUPPORTED_FUNCTIONS
}
