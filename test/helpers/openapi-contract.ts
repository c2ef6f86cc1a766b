import { readFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { parse } from 'yaml';

// ajv-formats is CommonJS with a default export; under NodeNext the callable sits on .default.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

interface HeaderObject {
  schema: Record<string, unknown>;
}
interface ResponseObject {
  headers?: Record<string, HeaderObject>;
  content?: Record<string, { schema: unknown }>;
}
interface OpenApiDoc {
  paths: Record<string, Record<string, { responses: Record<string, ResponseObject> }>>;
  components: { schemas: Record<string, unknown> };
}

/**
 * Headers HTTP itself puts on any answer (framing, caching, connection management): every other header
 * sent is the API's own and must be declared on the response that carries it.
 */
const TRANSPORT_HEADERS = new Set([
  'content-type',
  'content-length',
  'content-encoding',
  'transfer-encoding',
  'date',
  'connection',
  'keep-alive',
  'vary',
  'cache-control',
  'etag',
  'last-modified',
  'accept-ranges',
]);

export interface ObservedResponse {
  readonly method: string;
  /** The request path (query string allowed). */
  readonly url: string;
  readonly status: number;
  readonly headers: Headers;
  readonly body: string;
}

/**
 * Checks real responses against openapi.yaml the way a validating proxy would, with ajv (JSON Schema
 * 2020-12, formats on) compiling the document's own schemas: the operation must exist, the status must
 * be declared (or fall under `default`), the content type must be a declared one, the body must match
 * its schema with no undeclared property, every header the response declares must be sent, and every
 * header sent that is not HTTP's own (TRANSPORT_HEADERS) must be declared and match its schema. It remembers which
 * declared responses it has seen, so a test can insist that every one was driven.
 */
export class OpenApiContract {
  readonly doc: OpenApiDoc;
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true });
  private readonly cache = new Map<string, ValidateFunction>();
  private readonly routes: Array<{ template: string; pattern: RegExp }>;
  readonly seen = new Set<string>();

  constructor(openApiPath: string) {
    this.doc = parse(readFileSync(openApiPath, 'utf8')) as OpenApiDoc;
    addFormats(this.ajv);
    this.ajv.addSchema({ $id: 'components.json', $defs: this.rewriteRefs(closeObjects(this.doc.components.schemas)) as object });
    this.routes = Object.keys(this.doc.paths).map((template) => ({
      template,
      pattern: new RegExp(`^${template.replace(/[.]/g, '\\.').replace(/\{[^}]+\}/g, '[^/]+')}$`),
    }));
  }

  /** A validator for a component schema by name, e.g. `Problem`. */
  component(name: string): ValidateFunction {
    return this.compile(`component:${name}`, { $ref: `components.json#/$defs/${name}` });
  }

  /** Every declared response (`method path status`), `default` aside: what a complete run must see. */
  declared(): string[] {
    const out: string[] = [];
    for (const [path, operations] of Object.entries(this.doc.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        for (const status of Object.keys(operation.responses)) if (status !== 'default') out.push(`${method} ${path} ${status}`);
      }
    }
    return out.sort();
  }

  /** Throws, naming the difference, when `response` is not what openapi.yaml says it can be. */
  check(response: ObservedResponse): void {
    const method = response.method.toLowerCase();
    const path = response.url.split('?')[0] ?? '';
    const where = `${response.method} ${path} -> ${response.status}`;
    const route = this.routes.find((r) => r.pattern.test(path) && this.doc.paths[r.template]?.[method]);
    if (!route) throw new Error(`${where}: no such operation in openapi.yaml`);
    const operation = this.doc.paths[route.template]?.[method];
    const status = String(response.status);
    const key = operation?.responses[status] ? status : operation?.responses[`${status[0]}XX`] ? `${status[0]}XX` : 'default';
    const declared = operation?.responses[key];
    if (!declared) throw new Error(`${where}: status not declared (and no default)`);
    this.seen.add(`${method} ${route.template} ${key}`);

    const contentType = (response.headers.get('content-type') ?? '').split(';')[0]?.trim() ?? '';
    const media = declared.content?.[contentType];
    if (!media) throw new Error(`${where}: came as "${contentType}", declared ${JSON.stringify(Object.keys(declared.content ?? {}))}`);
    const body: unknown = contentType.endsWith('json') ? JSON.parse(response.body) : response.body;
    const validate = this.compile(`${method} ${route.template} ${key} ${contentType}`, media.schema);
    if (!validate(body)) {
      throw new Error(`${where}: body does not match: ${this.ajv.errorsText(validate.errors)}\n${response.body.slice(0, 500)}`);
    }

    const declaredHeaders = Object.entries(declared.headers ?? {});
    // A declared header is a promise a generated client reads: it must come with every such answer.
    const missing = declaredHeaders.map(([name]) => name).filter((name) => !response.headers.has(name));
    if (missing.length > 0) throw new Error(`${where}: declares ${missing.join(', ')} but did not send it`);
    for (const [name, value] of response.headers) {
      if (TRANSPORT_HEADERS.has(name)) continue;
      const spec = declaredHeaders.find(([declaredName]) => declaredName.toLowerCase() === name)?.[1];
      if (!spec) throw new Error(`${where}: sends ${name}, which the response does not declare`);
      const asValue = spec.schema.type === 'integer' ? (/^-?\d+$/.test(value) ? Number(value) : value) : value;
      const validateHeader = this.compile(`header ${JSON.stringify(spec.schema)}`, spec.schema);
      if (!validateHeader(asValue)) throw new Error(`${where}: header ${name}: ${value}: ${this.ajv.errorsText(validateHeader.errors)}`);
    }
  }

  private rewriteRefs(schema: unknown): unknown {
    return JSON.parse(JSON.stringify(schema).split('"#/components/schemas/').join('"components.json#/$defs/')) as unknown;
  }

  private compile(cacheKey: string, schema: unknown): ValidateFunction {
    let validate = this.cache.get(cacheKey);
    if (!validate) {
      validate = this.ajv.compile(this.rewriteRefs(closeObjects(schema)) as object);
      this.cache.set(cacheKey, validate);
    }
    return validate;
  }
}

/** Adds `additionalProperties: false` to every object schema that lists properties and says nothing else. */
function closeObjects(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closeObjects);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) out[k] = k === 'examples' ? v : closeObjects(v);
  if ('properties' in out && !('additionalProperties' in out)) out.additionalProperties = false;
  return out;
}
