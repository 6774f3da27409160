/**
 * Kiln's own REST API (`/api/...`). Every body is validated once with zod;
 * every handler calls the service layer (lib/services) and nothing else.
 * The routes come in groups, each in a module of its own.
 */
import type { Principal } from '../../services/accounts'
import type { SignalService } from '../../services/signals'
import type { ApiDeps } from '../deps'
import type { Router } from '../http'
import { accountRoutes } from './accounts'
import { historyRoutes } from './history'
import { outputRoutes } from './outputs'
import { importRoutes, planRoutes } from './plans'
import { providerRoutes } from './providers'
import { resourceRoutes } from './resources'
import { stackRoutes } from './stacks'
import { systemRoutes } from './system'
import { templateRoutes } from './templates'

export { refused } from './shared'

export function kilnRoutes(d: ApiDeps, router: Router<Principal>, signals: SignalService): void {
  systemRoutes(d, router)
  accountRoutes(d, router)
  templateRoutes(d, router)
  stackRoutes(d, router)
  planRoutes(d, router)
  importRoutes(d, router)
  resourceRoutes(d, router, signals)
  historyRoutes(d, router)
  outputRoutes(d, router)
  providerRoutes(d, router)
}
