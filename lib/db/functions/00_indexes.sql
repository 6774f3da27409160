-- Indexes and constraints the Prisma schema language cannot express.

-- A live stack name is unique within its project; deleted stacks keep their name.
CREATE UNIQUE INDEX IF NOT EXISTS stack_project_live_name_key ON stack (project_id, name) WHERE deleted_at IS NULL;

-- The claim query scans only available jobs, oldest first.
CREATE INDEX IF NOT EXISTS job_available_idx ON job (id) WHERE locked_by IS NULL;

-- A failing traversal's jobs in flight (kiln_maybe_finish_failed, at every
-- settle while it fails): without it the check searched the traversal's
-- queue for one, per finish (15.7 job rows per finish for an 800-node
-- traversal, growing with its size; test/db/plans.test.ts).
CREATE INDEX IF NOT EXISTS job_claimed_idx ON job (traversal_id) WHERE locked_by IS NOT NULL;

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

