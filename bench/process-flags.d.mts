// Types of process-flags.mjs for the TypeScript tests (the repository type-checks no JavaScript).

export const EVERY_POD_NODE_ARGS: readonly string[];
export const SERVICE_NODE_ARGS: readonly string[];
export const SERVICE_NODE_OPTIONS: string;
