/** What the API handlers need; built once per process (lib/server/context.ts) or per test. */
import type { FailedAttemptLimit } from '../auth/failed-attempts'
import type { Db } from '../db/client'
import type { Logger } from '../logger'
import type { ProjectRateLimit } from './project-rate'
import type { Registry } from '../resources/registry'
import type { AccountService, Principal } from '../services/accounts'
import type { PlanService } from '../services/plans'
import type { ReadService } from '../services/reads'
import type { SnapshotService } from '../services/snapshots'
import type { ImportService } from '../services/imports'
import type { ProviderService } from '../services/providers'
import type { StackService } from '../services/stacks'
import type { Actor } from '../services/stacks'
import type { Limits } from '../plan/template-check'

export interface ApiDeps {
  db: Db
  stacks: StackService
  plans: PlanService
  /** Adopting existing objects into a stack (external_id), and its preview. */
  imports: ImportService
  /** Import previews per project (KILN_IMPORT_PREVIEWS_PER_MINUTE). */
  importPreviews: ProjectRateLimit
  reads: ReadService
  /** The project's snapshots (deletion_policy: Snapshot): listed, and deleted on request. */
  snapshots: SnapshotService
  accounts: AccountService
  /** HTTP resource providers: registrations and callbacks. */
  providers: ProviderService
  registry: Registry
  log: Logger
  maxBodyBytes: number
  limits: Limits
  leaseMs: number
  /** Session cookies get `Secure` when the site is served over https. */
  secureCookies: boolean
  /** Failed credential attempts per client address (shared with the Socket.IO handshake). */
  failedAttempts: FailedAttemptLimit
  /** The URL clients reach Kiln at, without a trailing slash (Heat's redirects and links). */
  publicUrl: () => string
}

export const actorOf = (p: Principal): Actor => ({ projectId: p.projectId, name: p.tokenName })
