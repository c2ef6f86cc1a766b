import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';

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
  const used = Object.keys(schemas).filter((name) => withoutComponents.includes(refName(name)));
  const renames = new Map<string, string>();
  for (const name of used) {
    const plain = name.endsWith('Input') ? name.slice(0, -'Input'.length) : name;
    renames.set(name, plain !== name && !used.includes(plain) ? plain : name);
  }
  const kept: Record<string, unknown> = {};
  for (const name of used) kept[renames.get(name) ?? name] = schemas[name];
  let text = JSON.stringify({ ...doc, components: { ...doc.components, schemas: kept } });
  for (const [from, to] of renames) if (from !== to) text = text.split(refName(from)).join(refName(to));
  return JSON.parse(text) as ReturnType<TransformObject>;
};

type Transform = typeof jsonSchemaTransform;

/**
 * The zod transform, plus each operation's security from the route's access rule: public routes say
 * `security: []`, so the document's global bearer requirement does not apply to them.
 */
export const openApiTransform: Transform = (input) => {
  const out = jsonSchemaTransform(input);
  if (input.route.config?.access === 'public') {
    return { ...out, schema: { ...out.schema, security: [] } };
  }
  return out;
};
