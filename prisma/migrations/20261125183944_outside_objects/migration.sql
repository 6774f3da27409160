-- CreateTable
CREATE TABLE "outside_object" (
    "id" BIGSERIAL NOT NULL,
    "kind" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "project_id" UUID NOT NULL,
    "stack_id" UUID NOT NULL,
    "resource_name" TEXT NOT NULL,
    "resource_uuid" UUID NOT NULL,
    "state" TEXT NOT NULL,
    "size_bytes" BIGINT NOT NULL DEFAULT 0,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "outside_object_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "outside_object_kind_scope_key_key" ON "outside_object"("kind", "scope", "key");
