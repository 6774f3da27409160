-- AlterTable
ALTER TABLE "outside_object" ADD COLUMN     "snapshot_of" TEXT;
