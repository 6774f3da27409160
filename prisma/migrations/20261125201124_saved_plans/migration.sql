-- CreateTable
CREATE TABLE "plan" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "stack_id" UUID NOT NULL,
    "created_by" TEXT NOT NULL DEFAULT '',
    "source" TEXT NOT NULL,
    "template" JSONB NOT NULL,
    "environment" JSONB NOT NULL DEFAULT '{}',
    "parameters" JSONB NOT NULL DEFAULT '{}',
    "resources" JSONB NOT NULL,
    "timeout_mins" INTEGER,
    "disable_rollback" BOOLEAN,
    "preview" JSONB NOT NULL,
    "against_traversal_id" UUID,
    "against_template_id" UUID,
    "row_versions" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "applied_at" TIMESTAMPTZ(3),
    "applied_traversal_id" UUID,

    CONSTRAINT "plan_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "plan_stack_id_created_at_idx" ON "plan"("stack_id", "created_at");

-- AddForeignKey
ALTER TABLE "plan" ADD CONSTRAINT "plan_stack_id_fkey" FOREIGN KEY ("stack_id") REFERENCES "stack"("id") ON DELETE CASCADE ON UPDATE CASCADE;
