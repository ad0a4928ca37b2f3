// Types of otlp-protobuf.mjs for the TypeScript tests (the repository type-checks no JavaScript).

/** One decoded protobuf field: varints as bigint, length-delimited fields as their bytes. */
export type Field = { number: number; varint: bigint } | { number: number; bytes: Buffer };

export function fields(message: Buffer): Field[];
export function messages(message: Buffer, number: number): Buffer[];
export function bytesOf(message: Buffer, number: number): Buffer;
export function varintOf(message: Buffer, number: number): bigint;
