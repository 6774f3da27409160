-- kiln_commit_lazily: the calling step commits without waiting for the disk.
--
-- Lazy commits. The worker names its state-only resource types (p_result /
-- p_lazy_types 'lazy_types': types whose actions change nothing outside this
-- database, such as OS::Heat::TestResource, None, Value, RandomString). A node
-- step whose every row is of such a type — the row it releases and every row
-- it locks for a node it begins — commits with synchronous_commit off:
-- PostgreSQL answers before the WAL reaches the disk (it does within
-- 3 × wal_writer_delay). A database crash in that window loses the last such
-- steps, all of them after a point in commit order: the rows and sync points go
-- back to where they were and the nodes re-run (the sweeper, broken leases);
-- nothing outside the database was made that could leak or be made twice. A
-- step that records or starts an action on anything else waits for the disk
-- as always, and its flush carries every earlier lazy commit with it.
-- Measured: the flush is ~0.55 ms of a chain node's ~2.2 ms.
CREATE OR REPLACE FUNCTION kiln_commit_lazily() RETURNS void LANGUAGE sql AS $$
  SELECT set_config('synchronous_commit', 'off', true)
$$;
