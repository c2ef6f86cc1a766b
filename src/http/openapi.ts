import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { stringify } from 'yaml';
import { HEADERS, STATUS_HEADERS } from './routes/responses.js';

type TransformObject = typeof jsonSchemaTransformObject;
type Doc = Record<string, unknown> & { components?: { schemas?: Record<string, unknown> } };

/**
 * The zod provider emits every named schema twice (an `…Input` and an output variant) whether a route
 * uses it or not. Keep only the components the paths reference, and drop the `Input` suffix where the
 * plain name is free, so generated clients get one type per schema with the name the code gives it.
 */
export const openApiTransformObject: TransformObject = (input) => {
  const doc = jsonSchemaTransformObject(input) as Doc;
  const schemas = doc.components?.schemas;
  if (!schemas) return doc as ReturnType<TransformObject>;

  const refName = (name: string) => `"#/components/schemas/${name}"`;
  const withoutComponents = JSON.stringify({ ...doc, components: { ...doc.components, schemas: {} } });
  // Referenced from the paths, or (transitively) from a schema that is.
  const used = Object.keys(schemas).filter((name) => withoutComponents.includes(refName(name)));
  for (let i = 0; i < used.length; i++) {
    const text = JSON.stringify(schemas[used[i] ?? '']);
    for (const name of Object.keys(schemas)) if (!used.includes(name) && text.includes(refName(name))) used.push(name);
  }
  const renames = new Map<string, string>();
  for (const name of used) {
    const plain = name.endsWith('Input') ? name.slice(0, -'Input'.length) : name;
    renames.set(name, plain !== name && !used.includes(plain) ? plain : name);
  }
  const kept: Record<string, unknown> = {};
  for (const name of used) kept[renames.get(name) ?? name] = schemas[name];
  let text = JSON.stringify({ ...doc, components: { ...doc.components, schemas: kept } });
  for (const [from, to] of renames) if (from !== to) text = text.split(refName(from)).join(refName(to));
  return forGenerators(JSON.parse(text)) as ReturnType<TransformObject>;
};

/** The largest int32: an integer schema that allows more needs a 64-bit type in Java, C# or Go. */
const INT32_MAX = 2_147_483_647;

/**
 * What JSON Schema says but code generators miss, said their way too, in every schema of the document:
 * - `enum: [x]` beside `const: x`: some generators ignore `const` and lose the literal, and with it the
 *   narrowing on a discriminator such as `held`;
 * - `format: int64` on an integer whose bounds go past int32 (fencing tokens and watch indexes are
 *   microsecond-scale, about 2^50): generators for typed languages otherwise pick a 32-bit int.
 */
function forGenerators(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(forGenerators);
  if (node === null || typeof node !== 'object') return node;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) out[key] = key === 'examples' || key === 'example' ? value : forGenerators(value);
  if ('const' in out && !('enum' in out)) out.enum = [out.const];
  const max = out.maximum ?? out.exclusiveMaximum;
  if (out.type === 'integer' && !('format' in out) && (typeof max !== 'number' || max > INT32_MAX)) out.format = 'int64';
  return out;
}

type Transform = typeof jsonSchemaTransform;

/**
 * The zod transform, plus each operation's security from the route's access rule: public routes say
 * `security: []`, so the document's global bearer requirement does not apply to them.
 */
export const openApiTransform: Transform = (input) => {
  const out = withCanonicalHeaderNames(jsonSchemaTransform(input));
  const isPublic = input.route.config?.access === 'public';
  // Each response's headers: those its status always carries, and on routes the request rate limit
  // counts (all but the public ones and those opting out, see rate-limit.ts) the limiter's, on every
  // answer but a 401 or a 403 (authentication and the scope check run first; a refused caller is not
  // counted) and a 503 (load shedding and shutdown refuse before the limiter counts, so that a refusal
  // costs no allowance: not every 503 carries them).
  const config = input.route.config as { rateLimit?: unknown; noRetryAfter?: true } | undefined;
  const counted = !isPublic && config?.rateLimit !== false;
  const responses = (out.schema.response ?? {}) as Record<string, Record<string, unknown>>;
  const withHeaders = Object.fromEntries(
    Object.entries(responses).map(([status, response]) => {
      const names = (STATUS_HEADERS[status] ?? []).filter((name) => !(status === '409' && name === 'Retry-After' && config?.noRetryAfter));
      if (counted && status !== '401' && status !== '403' && status !== '503')
        names.push('X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset');
      if (names.length === 0) return [status, response];
      return [status, { ...response, headers: Object.fromEntries(names.map((name) => [name, HEADERS[name]])) }];
    }),
  );
  return { ...out, schema: { ...out.schema, response: withHeaders, ...(isPublic ? { security: [] } : {}) } };
};

const canonical = (name: string) => name.replace(/(^|-)([a-z])/g, (_m, dash: string, c: string) => dash + c.toUpperCase());

/**
 * Fastify validates headers under their lower-case names; the document names them as people write them
 * (`Idempotency-Key`), which is the same header: HTTP header names are case-insensitive.
 */
function withCanonicalHeaderNames(out: ReturnType<Transform>): ReturnType<Transform> {
  const headers = (out.schema as { headers?: { properties?: Record<string, unknown>; required?: string[] } }).headers;
  if (!headers?.properties) return out;
  const properties = Object.fromEntries(Object.entries(headers.properties).map(([name, schema]) => [canonical(name), schema]));
  const required = headers.required?.map(canonical);
  return { ...out, schema: { ...out.schema, headers: { ...headers, properties, ...(required ? { required } : {}) } } };
}

/**
 * The document as YAML that YAML 1.1 parsers (PyYAML, SnakeYAML, many generators) read as YAML 1.2 ones
 * do: written with the 1.1 rules, a string such as `2026-11-30T10:00:30.000Z`, `yes` or `on` is quoted,
 * where 1.2 output leaves it plain and a 1.1 parser turns it into a date or a boolean.
 */
export function openApiYaml(doc: unknown): string {
  return stringify(doc, { version: '1.1', strict: false });
}
