/**
 * Heat's Orchestration API v1 (`/v1/{project_id}/...`), enough of it that
 * python-heatclient and python-openstackclient work unchanged: field names,
 * `<ACTION>_<STATUS>` strings, ISO times without fractions, the
 * `/stacks/{name}` redirect (to the configured public URL), 202 for an update
 * while IN_PROGRESS, and Heat's error body (heat-errors.ts). Every handler goes
 * through the same service layer as Kiln's own API.
 *
 * The routes come in groups, registered in this order: where two routes
 * match the same path with as many parameters, the first registered wins.
 */
import type { Principal } from '../../services/accounts'
import type { SignalService } from '../../services/signals'
import type { ApiDeps } from '../deps'
import type { Router } from '../http'
import { byNameRoutes } from './by-name'
import { eventRoutes } from './events'
import { outputRoutes } from './outputs'
import { resourceRoutes } from './resources'
import { stackRoutes } from './stacks'
import { templateRoutes } from './templates'
import { updateRoutes } from './updates'

export function heatRoutes(d: ApiDeps, router: Router<Principal>, signals: SignalService): void {
  byNameRoutes(d, router)
  stackRoutes(d, router)
  templateRoutes(d, router)
  updateRoutes(d, router)
  outputRoutes(d, router)
  resourceRoutes(d, router, signals)
  eventRoutes(d, router)
}
