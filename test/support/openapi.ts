import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { parse } from 'yaml';
import { ROOT } from './paths';

const OPENAPI_FILE = join(ROOT, 'openapi.yaml');

/** The parts of an OpenAPI 3.1 document the tests read, after every $ref is resolved. */
interface Header {
  required?: boolean;
  schema: object;
}
interface MediaType {
  schema?: object;
  example?: unknown;
}
export interface Response {
  description: string;
  headers?: Record<string, Header>;
  content?: Record<string, MediaType>;
}
interface Operation {
  operationId: string;
  responses: Record<string, Response>;
}
export interface ApiDocument {
  openapi: string;
  info: { version: string };
  paths: Record<string, Record<string, Operation>>;
  components: { responses: Record<string, Response> };
}

export const OPENAPI_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

/**
 * openapi.yaml validated as OpenAPI 3.1 by @seriousme/openapi-schema-validator (the specification's
 * own JSON Schema), then with every $ref resolved in place.
 */
export async function loadApiDocument(): Promise<{ validation: { valid: boolean; errors?: unknown }; version: string; document: ApiDocument }> {
  const validator = new Validator();
  const validation = await validator.validate(parse(readFileSync(OPENAPI_FILE, 'utf8')) as Record<string, unknown>);
  return { validation, version: validator.version, document: validator.resolveRefs() as unknown as ApiDocument };
}
