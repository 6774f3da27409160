/** The shape of the ids Kiln issues (stacks, traversals, plans, versions, tokens, workers): a UUID's text. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
/**
 * The nil UUID: an id no row is given (the event watch for every stack; a page path that names no stack;
 * the holder of a parked node's row lock, kiln_parked_holder() in lib/db/functions/24_parked_holder.sql).
 */
export const NIL_UUID = '00000000-0000-0000-0000-000000000000'
