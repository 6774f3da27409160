/** The HOT template module: the only entry point the rest of Kiln imports. */
export { parseTemplate } from './parse'
export { parseEnvironment, aliasType } from './environment'
export { buildDefinition, isKnown } from './definition'
export { resolveProperties, resolveOutputs, type ResolvedOutput } from './resolve'
export { VERSIONS } from './versions'
export * from './types'
