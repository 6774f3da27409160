/** The shape of the ids Kiln issues (stacks, traversals, plans, versions, tokens, workers): a UUID's text. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
