/**
 * The generated references: file path (relative to the repository) -> its
 * content. `npm run docs` writes them; test/docs/docs.test.ts regenerates them
 * in memory and fails when a file on disk differs.
 */
import { apiReference } from './api'
import { cliReference } from './cli'
import { configurationReference } from './configuration'
import { heatApiReference } from './heat-api'
import { hotFunctionsReference } from './hot-functions'
import { protocolSchemas, providerProtocolReference } from './provider-protocol'
import { resourceTypesReference } from './resource-types'

export function generatedDocs(): Map<string, string> {
  return new Map([
    ['docs/reference/api.md', apiReference()],
    ['docs/reference/heat-api.md', heatApiReference()],
    ['docs/reference/cli.md', cliReference()],
    ['docs/reference/configuration.md', configurationReference()],
    ['docs/reference/resource-types.md', resourceTypesReference()],
    ['docs/reference/hot-functions.md', hotFunctionsReference()],
    ['docs/reference/provider-protocol.md', providerProtocolReference()],
    ...protocolSchemas(),
  ])
}
