-- Indexes and constraints the Prisma schema language cannot express.

-- A live stack name is unique within its project; deleted stacks keep their name.
CREATE UNIQUE INDEX IF NOT EXISTS stack_project_live_name_key ON stack (project_id, name) WHERE deleted_at IS NULL;

-- The claim (22_claim.sql) scans only ready jobs: unclaimed, not parked. It
-- finds the projects that have any (one probe per project, a loose index
-- scan on the key's first column) and each project's oldest first.
CREATE INDEX IF NOT EXISTS job_ready_idx ON job (project_id, id) WHERE locked_by IS NULL AND parked_until IS NULL;

-- A worker's claimed jobs (given back on shutdown or after an ambiguous
-- failure). Partial: with every unclaimed job in it, a plan could count the
-- ready jobs through it (`locked_by IS NULL`) and read every parked job's
-- entry on every claim.
CREATE INDEX IF NOT EXISTS job_holder_idx ON job (locked_by) WHERE locked_by IS NOT NULL;

-- A failing traversal's jobs in flight (kiln_maybe_finish_failed, at every
-- settle while it fails): without it the check searched the traversal's
-- queue for one, per finish (15.7 job rows per finish for an 800-node
-- traversal, growing with its size; test/db/plans.test.ts).
CREATE INDEX IF NOT EXISTS job_claimed_idx ON job (traversal_id) WHERE locked_by IS NOT NULL;

-- Parked nodes (25_park.sql): a stack's (aborts, a failing traversal's
-- settle), the next one due (the sweeper's timer), and those a wake key names.
-- Few at any time, so each index is small; none is on the hot path.
CREATE INDEX IF NOT EXISTS job_parked_stack_idx ON job (stack_id) WHERE park IS NOT NULL;
CREATE INDEX IF NOT EXISTS job_parked_until_idx ON job (parked_until) WHERE parked_until IS NOT NULL;
CREATE INDEX IF NOT EXISTS job_wake_key_idx ON job (wake_key) WHERE wake_key IS NOT NULL;

-- The sweeper looks for locks whose lease ran out. A column an index names,
-- in its key or its predicate, rules out HOT updates: with this index every
-- lock, release and heartbeat writes a new entry into each of resource's
-- indexes. Measured (bench, layered-100 and chain/layered-1000): 12 % of
-- resource updates were HOT with it, 83 % without it, and the wall times did
-- not change beyond the noise, so it stays until the sweeper can find expired
-- leases another way (from the claimed jobs, say) without missing a lock.
CREATE INDEX IF NOT EXISTS resource_locked_lease_idx ON resource (lease_expires_at) WHERE engine_id IS NOT NULL;

-- Traversals still running (sweeper: deadlines, lost messages).
CREATE INDEX IF NOT EXISTS traversal_running_idx ON traversal (deadline) WHERE outcome IS NULL;

-- A cleanup node that deleted a replaced row clears `replaces` on its
-- replacement: without this, one sequential scan of the stack's rows per node.
CREATE INDEX IF NOT EXISTS resource_replaces_idx ON resource (replaces) WHERE replaces IS NOT NULL;

