/**
 * A resource provider for tests (docs/reference/provider-protocol.md): a real
 * HTTP server that checks Kiln's signatures, keeps its objects in memory (its
 * "disk": they survive a restart() of the server), answers each idempotency
 * key as it first did, and takes injected faults.
 *
 * Types: `Bucket` (name, size in place, region immutable, token secret;
 * attributes url and arn, arn secret; every operation) and `Slow` (its
 * create answers 202 until the test finishes it with `finish`).
 *
 *   const p = await startTestProvider()
 *   p.fail('create', { status: 500, times: 2 })   // the next two creates answer 500
 *   p.hold('create')                               // the next create waits until released
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { verify } from '../../lib/resources/provider/signature'

export const PROVIDER_SECRET = 'test-provider-secret-0123456789'

export interface StoredObject {
  id: string
  type: string
  properties: Record<string, unknown>
  /** The resource row that created it. */
  row?: string
}

export type Fault = { status: number; times?: number; body?: string } | { malformed: true; times?: number }

interface Held {
  op: string
  release: () => void
  reached: Promise<void>
}

export interface TestProvider {
  url: string
  /** Objects by id. */
  objects: Map<string, StoredObject>
  /** Every request that passed the signature check, in order: operation, idempotency key, type. */
  requests: { op: string; key: string; type: string; body: Record<string, unknown> }[]
  /** Requests whose signature did not check. */
  unsigned: number
  /** How many objects each idempotency key created (never more than 1). */
  createsByKey: Map<string, number>
  fail(op: string, fault: Fault): void
  /** The next `op` request waits until `release()`; `reached` resolves when it arrives. */
  hold(op: string): Held
  /** Finish a Slow create started under `key`: the next ask answers 200; then POST its callback (rewritten to `kiln`'s origin). */
  finish(key: string, kiln: string, opts?: { callbacks?: number }): Promise<number[]>
  /** Keys of Slow creates waiting to be finished. */
  pending(): string[]
  /** Stop the server and start it again on the same port, keeping the objects (a provider restarted mid-operation). */
  restart(): Promise<void>
  stop(): Promise<void>
}

const TYPES = {
  protocol: 1,
  types: [
    {
      name: 'Bucket',
      description: 'A bucket the test provider keeps.',
      properties: {
        name: { type: 'string', required: true },
        size: { type: 'integer', default: 1, update_allowed: true },
        region: { type: 'string', default: 'here', immutable: true },
        token: { type: 'string', secret: true },
      },
      attributes: { url: { type: 'string', description: 'Where the bucket is' }, arn: { type: 'string', secret: true } },
      operations: ['create', 'update', 'delete', 'observe', 'adopt', 'cancel', 'signal'],
    },
    {
      name: 'Slow',
      description: 'Created by a long operation (202) the test finishes.',
      properties: { label: { type: 'string', default: 'slow' } },
      attributes: { label: { type: 'string' } },
      operations: ['create', 'delete', 'cancel'],
    },
  ],
}

export async function startTestProvider(opts: { secret?: string; /** a broken provider: the secret `token` shows in the plain `url` attribute */ leakSecret?: boolean } = {}): Promise<TestProvider> {
  const secret = opts.secret ?? PROVIDER_SECRET
  const objects = new Map<string, StoredObject>()
  const answers = new Map<string, { status: number; body: unknown }>()
  const faults = new Map<string, Fault[]>()
  const holds = new Map<string, { release: () => void; arrived: () => void; released: Promise<void> }>()
  const slow = new Map<string, { callback: string; done: boolean }>()
  const requests: TestProvider['requests'] = []
  const createsByKey = new Map<string, number>()
  let seq = 0
  let unsigned = 0

  const reply = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' })
    res.end(body === undefined ? '' : JSON.stringify(body))
  }

  function injected(op: string): Fault | null {
    const list = faults.get(op)
    const f = list?.[0]
    if (!f) return null
    const left = (f.times ?? 1) - 1
    if (left <= 0) list!.shift()
    else f.times = left
    return f
  }

  function act(op: string, b: Record<string, unknown>): { status: number; body: unknown } {
    const props = (b.properties ?? {}) as Record<string, unknown>
    const previous = b.previous as { physical_id: string | null; properties: Record<string, unknown> } | undefined
    const key = String(b.idempotency_key)
    const id = previous?.physical_id ?? ''
    switch (op) {
      case 'create': {
        if (b.type === 'Slow') {
          const s = slow.get(key) ?? { callback: String(b.callback ?? ''), done: false }
          slow.set(key, s)
          if (!s.done) return { status: 202, body: { operation: `op-${key.slice(-8)}`, message: 'making it' } }
        }
        const row = (b.resource as { uuid: string }).uuid
        const obj = { id: `${b.type === 'Slow' ? 'slow' : 'bkt'}-${++seq}`, type: String(b.type), properties: { ...props }, row }
        objects.set(obj.id, obj)
        createsByKey.set(key, (createsByKey.get(key) ?? 0) + 1)
        const attributes = attributesOf(obj)
        if (opts.leakSecret) attributes.url = `${String(attributes.url)}?token=${String(props.token)}`
        return { status: 200, body: { physical_id: obj.id, attributes, data: { made: obj.id } } }
      }
      case 'update': {
        const obj = objects.get(id)
        if (!obj) return { status: 404, body: { error: `${id} is gone` } }
        if (props.name !== obj.properties.name) return { status: 409, body: { error: 'a new name needs a new bucket', replace: true } }
        obj.properties = { ...props }
        return { status: 200, body: { attributes: attributesOf(obj) } }
      }
      case 'delete': {
        // A create whose answer was lost (its worker died) left no physical id: the object is found by its row.
        const row = (b.resource as { uuid: string }).uuid
        for (const o of objects.values()) if (o.id === id || (!id && o.row === row)) objects.delete(o.id)
        return { status: 200, body: {} }
      }
      case 'observe': {
        const obj = objects.get(id)
        return { status: 200, body: obj ? { exists: true, properties: obj.properties, attributes: attributesOf(obj) } : { exists: false } }
      }
      case 'adopt': {
        const obj = objects.get(String(b.external_id))
        if (!obj) return { status: 404, body: { error: `no bucket ${String(b.external_id)}` } }
        return { status: 200, body: { physical_id: obj.id, properties: obj.properties, attributes: attributesOf(obj) } }
      }
      case 'signal': {
        const details = (b.signal ?? {}) as { status?: string; reason?: string }
        if (details.status === 'FAILURE') return { status: 422, body: { error: `a failure signal: ${details.reason ?? 'no reason'}` } }
        const obj = objects.get(id)
        if (obj) obj.properties = { ...obj.properties, lastSignal: details.reason ?? null }
        return { status: 200, body: {} }
      }
      case 'cancel':
        slow.delete(key.replace(/:cancel$/, ':create'))
        return { status: 200, body: {} }
      default:
        return { status: 404, body: { error: `no operation ${op}` } }
    }
  }

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const chunks: Buffer[] = []
    for await (const c of req) chunks.push(c as Buffer)
    const text = Buffer.concat(chunks).toString()
    if (!verify(secret, req.headers['kiln-signature'] as string | undefined, text)) {
      unsigned++
      return reply(res, 401, { error: 'bad signature' })
    }
    const op = (req.url ?? '/').slice(1)
    if (req.method === 'GET' && op === 'types') return reply(res, 200, TYPES)
    const b = JSON.parse(text) as Record<string, unknown>
    requests.push({ op, key: String(b.idempotency_key), type: String(b.type), body: b })
    const held = holds.get(op)
    if (held) {
      holds.delete(op)
      held.arrived()
      await held.released
    }
    const f = injected(op)
    if (f) {
      if ('malformed' in f) {
        res.writeHead(200, { 'content-type': 'application/json' })
        return res.end('{"physical_id": ')
      }
      return reply(res, f.status, f.body === undefined ? { error: `injected ${f.status}` } : JSON.parse(f.body))
    }
    // An idempotency key is answered as it first was, once it was answered for good (not a 202).
    const key = `${op} ${String(b.idempotency_key)}`
    const again = answers.get(key)
    if (again) return reply(res, again.status, again.body)
    const out = act(op, b)
    if (out.status !== 202 && op !== 'observe') answers.set(key, out)
    reply(res, out.status, out.body)
  }

  let server: Server = createServer((req, res) => void handle(req, res))
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const port = (server.address() as AddressInfo).port

  return {
    url: `http://127.0.0.1:${port}`,
    objects,
    requests,
    get unsigned() {
      return unsigned
    },
    createsByKey,
    fail(op, fault) {
      faults.set(op, [...(faults.get(op) ?? []), fault])
    },
    hold(op) {
      let release!: () => void
      let arrived!: () => void
      const released = new Promise<void>((r) => (release = r))
      const reached = new Promise<void>((r) => (arrived = r))
      holds.set(op, { release, arrived, released })
      return { op, release, reached }
    },
    async finish(key, kiln, o = {}) {
      const s = slow.get(key)
      if (!s) throw new Error(`no slow operation ${key}`)
      s.done = true
      const u = new URL(s.callback)
      const target = `${kiln}${u.pathname}${u.search}`
      const statuses: number[] = []
      for (let i = 0; i < (o.callbacks ?? 1); i++) statuses.push((await fetch(target, { method: 'POST' })).status)
      return statuses
    },
    pending: () => [...slow.entries()].filter(([, s]) => !s.done).map(([k]) => k),
    async restart() {
      const closed = new Promise<void>((r) => server.close(() => r()))
      server.closeAllConnections()
      await closed
      server = createServer((req, res) => void handle(req, res))
      await new Promise<void>((r) => server.listen(port, '127.0.0.1', r))
    },
    async stop() {
      for (const h of holds.values()) h.release()
      server.closeAllConnections()
      await new Promise<void>((r) => server.close(() => r()))
    },
  }
}

function attributesOf(obj: StoredObject): Record<string, unknown> {
  return { url: `mem://${String(obj.properties.name ?? obj.properties.label)}`, arn: `arn:test:${obj.id}`, label: obj.properties.label }
}
