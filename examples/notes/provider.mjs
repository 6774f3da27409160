// The Notes provider: a small resource provider for Kiln (docs/reference/provider-protocol.md)
// that keeps notes as JSON files in a directory. A service of its own, with no code of Kiln's:
// what a provider written by anyone looks like.
//
//   NOTES_PORT=8700 NOTES_DIR=.notes NOTES_SECRET=<secret> node examples/notes/provider.mjs
//
// Type Note: `title` (a change makes a new note), `body` (changed in place), `delay_ms` (how long
// each action takes; what a slower back end would do). Attributes: `path` (the note's file) and
// `words`. Edit a note's file by hand and Kiln's drift check finds it.
import { createHmac, createHash, timingSafeEqual, randomUUID } from 'node:crypto'
import { Buffer } from 'node:buffer'
import { createServer } from 'node:http'
import fs from 'node:fs'
import path from 'node:path'

const port = Number(process.env.NOTES_PORT ?? 8700)
const dir = path.resolve(process.env.NOTES_DIR ?? '.notes')
const secret = process.env.NOTES_SECRET
if (!secret) {
  console.error('NOTES_SECRET is not set: give the secret Kiln signs its requests with')
  process.exit(2)
}
const notesDir = path.join(dir, 'notes')
const answersDir = path.join(dir, 'answers')
fs.mkdirSync(notesDir, { recursive: true })
fs.mkdirSync(answersDir, { recursive: true })

const TYPES = {
  protocol: 1,
  types: [
    {
      name: 'Note',
      description: 'A note, kept as a JSON file by the Notes provider.',
      properties: {
        title: { type: 'string', required: true, description: 'A change makes a new note.' },
        body: { type: 'string', default: '', update_allowed: true },
        delay_ms: { type: 'integer', default: 0, update_allowed: true, description: 'How long each action takes.' },
      },
      attributes: { path: { type: 'string', description: "The note's file." }, words: { type: 'integer' } },
      operations: ['create', 'update', 'delete', 'observe', 'adopt'],
    },
  ],
}

/** Kiln-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">, at most 5 minutes old. */
function signed(header, body) {
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header ?? '')
  if (!m || Math.abs(Date.now() / 1000 - Number(m[1])) > 300) return false
  const want = createHmac('sha256', secret).update(`${m[1]}.${body}`).digest()
  return timingSafeEqual(want, Buffer.from(m[2], 'hex'))
}

const fileOf = (id) => path.join(notesDir, `${id}.json`)
const read = (id) => (/^[0-9a-f-]{36}$/.test(id ?? '') && fs.existsSync(fileOf(id)) ? JSON.parse(fs.readFileSync(fileOf(id), 'utf8')) : null)
function write(id, note) {
  // Atomic: a reader never sees half a note.
  fs.writeFileSync(`${fileOf(id)}.tmp`, JSON.stringify(note, null, 2) + '\n')
  fs.renameSync(`${fileOf(id)}.tmp`, fileOf(id))
}
const attributes = (id, note) => ({ path: fileOf(id), words: note.body.split(/\s+/).filter(Boolean).length })
const seen = (note) => ({ title: note.title, body: note.body })

/** An answer given for good to a key is kept on disk: asked again (a retry, a restart), it is given again. */
const answerFile = (op, key) => path.join(answersDir, createHash('sha256').update(`${op} ${key}`).digest('hex'))
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function act(op, req) {
  const props = req.properties ?? {}
  const id = req.previous?.physical_id ?? null
  switch (op) {
    case 'create': {
      await sleep(Number(props.delay_ms ?? 0))
      const newId = randomUUID()
      const note = { title: props.title, body: props.body ?? '', row: req.resource.uuid }
      write(newId, note)
      return [200, { physical_id: newId, attributes: attributes(newId, note) }]
    }
    case 'update': {
      await sleep(Number(props.delay_ms ?? 0))
      const note = read(id)
      if (!note) return [404, { error: `note ${id} is gone` }]
      if (note.title !== props.title) return [409, { error: 'a new title makes a new note', replace: true }]
      note.body = props.body ?? ''
      write(id, note)
      return [200, { attributes: attributes(id, note) }]
    }
    case 'delete': {
      await sleep(Number(props.delay_ms ?? 0))
      // A create whose answer never reached Kiln left no id: find its note by the resource row.
      for (const f of fs.readdirSync(notesDir).filter((n) => n.endsWith('.json'))) {
        const noteId = f.slice(0, -5)
        if (noteId === id || (!id && read(noteId)?.row === req.resource.uuid)) fs.rmSync(fileOf(noteId), { force: true })
      }
      return [200, {}]
    }
    case 'observe': {
      const note = read(id)
      return [200, note ? { exists: true, properties: { ...props, ...seen(note) }, attributes: attributes(id, note) } : { exists: false }]
    }
    case 'adopt': {
      const note = read(req.external_id)
      if (!note) return [404, { error: `there is no note ${req.external_id}` }]
      return [200, { physical_id: req.external_id, properties: seen(note), attributes: attributes(req.external_id, note) }]
    }
    default:
      return [404, { error: `the Notes provider has no operation ${op}` }]
  }
}

const server = createServer(async (req, res) => {
  const chunks = []
  for await (const c of req) chunks.push(c)
  const body = Buffer.concat(chunks).toString()
  const answer = (status, value) => {
    res.writeHead(status, { 'content-type': 'application/json' })
    res.end(JSON.stringify(value))
  }
  if (!signed(req.headers['kiln-signature'], body)) return answer(401, { error: 'the request is not signed with the secret' })
  const op = (req.url ?? '/').slice(1)
  if (req.method === 'GET' && op === 'types') return answer(200, TYPES)
  if (req.method !== 'POST') return answer(405, { error: 'POST' })
  let parsed
  try {
    parsed = JSON.parse(body)
  } catch {
    return answer(400, { error: 'the body is not JSON' })
  }
  const file = answerFile(op, parsed.idempotency_key)
  if (op !== 'observe' && fs.existsSync(file)) {
    const [status, value] = JSON.parse(fs.readFileSync(file, 'utf8'))
    return answer(status, value)
  }
  try {
    const [status, value] = await act(op, parsed)
    if (op !== 'observe') fs.writeFileSync(file, JSON.stringify([status, value]))
    answer(status, value)
  } catch (err) {
    answer(500, { error: String(err?.message ?? err) })
  }
})

server.listen(port, '127.0.0.1', () => console.log(`Notes provider on http://127.0.0.1:${server.address().port}, notes in ${notesDir}`))
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => server.close(() => process.exit(0)))
