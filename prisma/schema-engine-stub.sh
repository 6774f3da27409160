#!/bin/sh
# The native Prisma schema engine cannot be downloaded on offline machines.
# `prisma generate/validate/format` do not need it; Kiln applies migrations
# itself (`npm run db:migrate`, lib/db/migrate.ts) and writes them with
# `npm run db:migration <name>` (the WASM schema engine). Exit non-zero so that a
# `prisma migrate` that falls back to this stub fails loudly instead of
# silently doing nothing.
echo "prisma schema-engine binary is not available offline: use npm run db:migrate (apply) or npm run db:migration <name> (write)" >&2
exit 1
