-- DropIndex
DROP INDEX "event_stack_id_resource_name_idx";
