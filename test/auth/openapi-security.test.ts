import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { generateOpenApiYaml } from '../../scripts/openapi.js';

type Operation = { security?: unknown[]; responses: Record<string, unknown> };
type Doc = {
  security: unknown[];
  components: {
    securitySchemes: Record<string, { type: string; scheme: string }>;
    schemas: Record<string, { properties?: { code?: { enum?: string[] } } }>;
  };
  paths: Record<string, Record<string, Operation>>;
};

describe('the OpenAPI document and security', () => {
  it('declares the bearer scheme, requires it everywhere but the probes, and lists the admin routes and new errors', async () => {
    const generated = await generateOpenApiYaml();
    // The committed document is what the code generates (npm run openapi rewrites it).
    expect(readFileSync(new URL('../../openapi.yaml', import.meta.url), 'utf8')).toBe(generated);

    const doc = parse(generated) as Doc;
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
    expect(doc.paths['/livez']?.get?.security).toEqual([]);
    expect(doc.paths['/readyz']?.get?.security).toEqual([]);
    expect(doc.paths['/v1/locks/{key}/acquire']?.post?.security).toBeUndefined();

    expect(Object.keys(doc.paths['/v1/locks'] ?? {})).toEqual(['get']);
    expect(Object.keys(doc.paths['/v1/locks/{key}'] ?? {}).sort()).toEqual(['delete', 'get']);
    for (const [path, method] of [
      ['/v1/locks/{key}/acquire', 'post'],
      ['/v1/locks', 'get'],
      ['/v1/locks/{key}', 'delete'],
    ] as const) {
      expect(Object.keys(doc.paths[path]?.[method]?.responses ?? {})).toEqual(expect.arrayContaining(['401', '403', '429']));
    }
    expect(doc.components.schemas.Problem?.properties?.code?.enum).toEqual(
      expect.arrayContaining(['unauthenticated', 'forbidden', 'rate_limited', 'quota_exceeded']),
    );
  });
});
