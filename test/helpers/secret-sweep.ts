/**
 * Looking for a secret in everything a stack's reads answer: every GET route
 * the routers register (Kiln and Heat), each path parameter filled with every
 * value it can take, and the query variants that change what a route shows.
 * Requests that name an output to see it (the Heat API's output show: an
 * explicit reveal) are left out: tests check them on their own.
 */
import type { ApiServer } from './api-server'
import { registeredRoutes } from './routes'

export function stackUrls(api: ApiServer, s: { id: string; name: string; traversals: string[]; resources: string[]; keys: string[] }): Set<string> {
  const p = api.a.projectId
  const urls = new Set<string>()
  for (const r of registeredRoutes().filter((x) => x.method === 'GET' && !(x.path.startsWith('/v1/') && x.path.endsWith('/outputs/{key}')))) {
    const combos: Record<string, string[]> = { stack: [s.id, s.name], traversal: ['current', ...s.traversals], project: [p], name: [s.name, s.id], id: [s.id], resource: s.resources, key: s.keys, type: ['OS::Heat::TestResource'], token: [] }
    let paths = [r.path]
    for (const [k, vs] of Object.entries(combos)) if (r.path.includes(`{${k}}`)) paths = paths.flatMap((x) => vs.map((v) => x.replaceAll(`{${k}}`, encodeURIComponent(v))))
    for (const x of paths) urls.add(x)
  }
  for (const t of ['current', ...s.traversals]) for (const f of ['json', 'dot', 'graphml']) urls.add(`/api/stacks/${s.id}/traversals/${t}/graph?format=${f}`)
  for (const q of ['all=1', 'all=true']) urls.add(`/api/stacks/${s.id}/resources?${q}`)
  for (const q of ['limit=1000', 'after=0&limit=1000', `resource=${s.resources[0]}`, `traversal=${s.traversals[0]}`]) urls.add(`/api/stacks/${s.id}/events?${q}`)
  for (const q of ['sort_dir=desc', 'resource_status=FAILED', 'limit=10000']) urls.add(`/v1/${p}/stacks/${s.name}/${s.id}/events?${q}`)
  for (const k of s.keys) urls.add(`/api/stacks/${s.id}/outputs/${k}?reveal=false`)
  return urls
}

/** Where one of `needles` shows in a text: a few characters around it, else null. */
export function around(text: string, needles: readonly string[]): string | null {
  for (const n of needles) {
    const at = text.indexOf(n)
    if (at >= 0) return text.slice(Math.max(0, at - 80), at + n.length + 40)
  }
  return null
}

/** GET every url with project A's token (redirects followed): a 5xx, or a needle in the body, is a leak. */
export async function sweep(api: ApiServer, urls: Iterable<string>, needles: readonly string[]): Promise<{ leaks: string[]; fetched: number }> {
  const leaks: string[] = []
  let fetched = 0
  for (const u of urls) {
    let res = await api.call('GET', u)
    if (res.status === 302) res = await api.call('GET', new URL(res.headers.get('location')!).pathname + new URL(res.headers.get('location')!).search)
    fetched++
    if (res.status >= 500) leaks.push(`${u}: ${res.status}`)
    const at = around(res.text, needles)
    if (at !== null) leaks.push(`${u}: ${at}`)
  }
  return { leaks, fetched }
}
