-- AlterTable
ALTER TABLE "traversal" ADD COLUMN     "converge" BOOLEAN NOT NULL DEFAULT false;
