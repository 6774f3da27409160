/**
 * docs/reference/provider-protocol.md and a JSON Schema file per message
 * (docs/reference/provider-protocol/<Message>.schema.json), from the zod
 * schemas Kiln checks every reply with (lib/resources/provider/protocol.ts).
 */
import { z } from 'zod'
import { MESSAGES, PROTOCOL_VERSION } from '../../lib/resources/provider/protocol'
import { SIGNATURE_HEADER, SIGNATURE_TOLERANCE_SECS } from '../../lib/resources/provider/signature'
import { ATTEMPTS, REQUEST_TIMEOUT_MS } from '../../lib/resources/provider/client'
import { generatedHeader } from './markdown'

export const PROTOCOL_SOURCES = ['lib/resources/provider/']

const schemaOf = (m: z.ZodType, name: string) => JSON.stringify({ $id: `kiln-provider-protocol-v${PROTOCOL_VERSION}/${name}`, ...z.toJSONSchema(m, { io: 'input', unrepresentable: 'any' }) }, null, 2) + '\n'

/** The schema files, by path. */
export function protocolSchemas(): [string, string][] {
  return Object.entries(MESSAGES).map(([name, m]) => [`docs/reference/provider-protocol/${name}.schema.json`, schemaOf(m as z.ZodType, name)])
}

export function providerProtocolReference(): string {
  const messages = Object.entries(MESSAGES).map(([name, m]) => [`### ${name}`, '', `[${name}.schema.json](provider-protocol/${name}.schema.json)`, '', '```json', schemaOf(m as z.ZodType, name).trimEnd(), '```', ''].join('\n'))
  return [
    generatedHeader(`Resource provider protocol, version ${PROTOCOL_VERSION}`, PROTOCOL_SOURCES),
    'A provider is an HTTP service that makes, changes, reads and removes objects for Kiln. Register it with',
    '`POST /api/providers` (`kiln provider add`); its types are then `<prefix>::<type>` in the templates of the',
    'project that registered it (or of every project, when the admin registers it with `scope: global`). Kiln',
    'treats them as it treats its own types: locks, supersede and retrigger, cancel, drift, converge and import work',
    'the same. How to write one: [the provider guide](../guide/providers.md).',
    '',
    '## Requests',
    '',
    '| Request | When | Answer |',
    '|---|---|---|',
    '| `GET /types` | at registration and `POST /api/providers/{name}/refresh` | 200 `TypesReply` |',
    '| `POST /create` | a resource is created | 200 `ActionReply`, 202 `Accepted`, or 4xx `ErrorReply` |',
    '| `POST /update` | a property declared `update_allowed` changed | 200 `ActionReply`, 202, 409 `{"error", "replace": true}` for a replacement, or 4xx |',
    '| `POST /delete` | a resource is deleted (also one whose create\'s answer was lost: `previous.physical_id` is null; find the object by `resource.uuid`) | 200 (or 404: gone already), 202, or 4xx |',
    '| `POST /observe` | drift checks, `converge`, stack check, the recovery of a failed resource | 200 `ObserveReply` (or 404: gone), at once |',
    '| `POST /adopt` | import (`external_id`), and its preview (`dry_run`) | 200 `ActionReply` with `properties`, at once, or 4xx |',
    '| `POST /cancel` | an action Kiln stops (a delete, a preempting update, the stack\'s timeout) while the provider works on it | 200; best effort |',
    '| `POST /signal` | a resource signal to a resource of the type (`signal` in its operations), with the sender\'s body in `signal` | 200 takes it; 4xx refuses it (the sender gets a 400 with the reason) |',
    '',
    'Every `POST` carries an `ActionRequest`. A provider need not implement the operations its types do not list in',
    '`operations` (create and delete are required).',
    '',
    '## Guarantees and duties',
    '',
    `- **Signed.** Every request has a \`${SIGNATURE_HEADER}: t=<unix seconds>,v1=<hex>\` header: HMAC-SHA256, keyed with the`,
    '  secret given at registration, of `<t>.<body>` (the exact bytes; empty for `GET /types`). Check it, and refuse a',
    `  \`t\` more than ${SIGNATURE_TOLERANCE_SECS} s from your clock.`,
    '- **Idempotent.** `idempotency_key` is the same for every attempt at one action of one resource row in one',
    '  traversal: a retry, a request whose answer was lost, a worker that died, a long operation asked again. Answer a',
    '  key you have answered as you did, and never act twice for it.',
    `- **Retried.** A connection that fails, no answer within ${REQUEST_TIMEOUT_MS / 1000} s (\`KILN_PROVIDER_TIMEOUT_MS\`), 429 and 5xx`,
    `  are retried with back-off (honouring \`Retry-After\`), ${ATTEMPTS} attempts in all, within the action's \`deadline\`.`,
    '  A 4xx is the action\'s failure: its `error` becomes the resource\'s status reason. A reply that breaks this',
    '  protocol (not JSON, a field of the wrong type) fails the action, naming the field.',
    '- **Long operations.** Answer `202` with an `Accepted` to say the operation goes on. The resource then waits',
    '  without holding a worker, until you `POST` the request\'s `callback` URL (any body; the URL is signed for that',
    '  resource) or `retry_after_ms` passes (without it, a back-off growing from 1 s to 60 s). Kiln then sends the',
    '  same request with the same key: answer how the operation ended, or 202 again. A duplicate or late callback',
    '  only makes Kiln ask once more.',
    '- **Deletes** must succeed when the object is gone already.',
    '- **Observe** is read-only and fast, and reports a property exactly as Kiln sent it when it has not changed (the',
    '  same number, not the same number as a string), so that comparing finds only real changes. Leave out what',
    '  you cannot read.',
    '- **Secrets.** A property or attribute declared `secret` is masked in every response, event and log line of',
    '  Kiln; it is sent to you in the clear, over the URL you registered (use https beyond one machine).',
    '',
    '## Messages',
    '',
    ...messages,
  ].join('\n')
}
