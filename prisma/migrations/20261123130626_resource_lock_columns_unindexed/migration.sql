-- DropIndex
DROP INDEX "resource_engine_id_idx";

-- DropIndex
DROP INDEX "resource_lease_expires_at_idx";
