#!/bin/sh
# Starts the Notes provider, registers it with Kiln, and creates the example stack.
# Kiln must be running with Kiln::Exec allowed to run /bin/sh:
#   KILN_EXEC_COMMANDS=/bin/sh npm start
# and KILN_URL and KILN_TOKEN set as for the CLI. Ctrl-C stops the provider.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
export NOTES_PORT="${NOTES_PORT:-8700}"
export NOTES_DIR="${NOTES_DIR:-$here/.notes}"
mkdir -p "$NOTES_DIR"
# The secret Kiln signs its requests with: made once, kept beside the notes.
[ -f "$NOTES_DIR/secret" ] || node -e "console.log(require('node:crypto').randomBytes(24).toString('base64url'))" > "$NOTES_DIR/secret"
export NOTES_SECRET="$(cat "$NOTES_DIR/secret")"

node "$here/provider.mjs" &
provider=$!
trap 'kill $provider 2>/dev/null' EXIT INT TERM

# Kiln reads the provider's types now (retrying while it is still starting).
npx kiln provider add notes "http://127.0.0.1:$NOTES_PORT" --prefix Notes --secret "$NOTES_SECRET"
# Run again, it keeps the stack it made the first time.
npx kiln stack show notes-demo > /dev/null 2>&1 || npx kiln stack create notes-demo -t "$here/stack.yaml" --wait
npx kiln stack output notes-demo
echo "The provider keeps running; edit the note file above, then: npx kiln stack drift notes-demo"
wait $provider
