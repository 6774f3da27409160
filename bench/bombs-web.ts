/**
 * The web process for bench/bombs.ts: the API exactly as server.ts mounts it
 * (appContext().api, evaluation threads started the same way), on a loopback
 * port, without Next's UI pages, which the bombs do not touch.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { toNodeHandler } from '../lib/api/node-adapter'
import { configureEvaluation } from '../lib/evaluation/pool'
import { evaluationSettingsFrom } from '../lib/evaluation/settings'
import { appContext } from '../lib/server/context'

const ctx = appContext()
configureEvaluation(evaluationSettingsFrom(ctx.env)).warm()
const server = createServer(toNodeHandler(ctx.api))
server.listen(0, '127.0.0.1', () => process.send?.({ kind: 'ready', url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }))
process.on('disconnect', () => process.exit(0))
