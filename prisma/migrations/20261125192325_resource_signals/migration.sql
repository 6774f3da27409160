-- CreateTable
CREATE TABLE "resource_signal" (
    "id" BIGSERIAL NOT NULL,
    "stack_id" UUID NOT NULL,
    "handle" TEXT NOT NULL,
    "signal_id" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "reason" TEXT NOT NULL DEFAULT '',
    "data" JSONB,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "resource_signal_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "resource_signal_stack_id_handle_signal_id_key" ON "resource_signal"("stack_id", "handle", "signal_id");
