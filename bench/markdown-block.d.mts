// Types of markdown-block.mjs for the TypeScript tests (the repository type-checks no JavaScript).

export function writeBlock(file: string, name: string, md: string): void;
export function readBlock(file: string, name: string): string;
