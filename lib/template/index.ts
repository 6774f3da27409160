/** The HOT template module: the only entry point the rest of Kiln imports. */
export { parseTemplate } from './parse'
export { parseEnvironment, aliasType } from './environment'
export { buildDefinition, isKnown } from './definition'
export { knownSecrets, resolveProperties, resolveOutputs, resolveSecretAware, type ResolvedOutput, type SecretAwareProperties } from './resolve'
export { addForms, holdsSecret, MASK, MIN_EMBEDDED, redact, redactText, secretList, Secrets, storedForms } from './secrecy'
export { VERSIONS } from './versions'
export * from './types'
