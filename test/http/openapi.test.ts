import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { generateOpenApiYaml } from '../../scripts/openapi.js';
import { PROBLEM_CODES } from '../../src/http/schemas/problem.js';

const committed = readFileSync(new URL('../../openapi.yaml', import.meta.url), 'utf8');

type Operation = { operationId?: string; responses: Record<string, { content?: Record<string, unknown> }> };

describe('openapi.yaml', () => {
  it('is exactly what the code generates (run `npm run openapi` after changing a route)', async () => {
    expect(committed).toBe(await generateOpenApiYaml());
  });

  it('is OpenAPI 3.1 and declares every lock operation with its success and error responses', () => {
    const doc = parse(committed) as { openapi: string; paths: Record<string, Record<string, Operation>> };
    expect(doc.openapi).toBe('3.1.0');
    const expected: Record<string, string[]> = {
      'post /v1/locks/{key}/acquire': ['200', '400', '401', '403', '409', '413', '415', '422', '429', '503'],
      // Renew and release are rate limited only when they fail (not_owner): their 429 says so.
      'post /v1/locks/{key}/renew': ['200', '400', '401', '403', '409', '413', '415', '429', '503'],
      'post /v1/locks/{key}/release': ['200', '400', '401', '403', '409', '413', '415', '429', '503'],
      'get /v1/locks/{key}': ['200', '400', '401', '403', '429', '503'],
      'delete /v1/locks/{key}': ['200', '400', '401', '403', '404', '409', '413', '415', '429', '503'],
      'get /v1/locks': ['200', '400', '401', '403', '429', '503'],
      'get /livez': ['200'],
      'get /readyz': ['200', '503'],
      'get /openapi.json': ['200'],
      'get /openapi.yaml': ['200'],
    };
    for (const [route, statuses] of Object.entries(expected)) {
      const [method, path] = route.split(' ') as [string, string];
      const op = doc.paths[path]?.[method];
      expect(op, route).toBeDefined();
      expect(Object.keys(op?.responses ?? {}).sort()).toEqual(statuses.sort());
      for (const status of statuses) {
        const contentType =
          status !== '200' ? 'application/problem+json' : path === '/openapi.yaml' ? 'application/yaml' : 'application/json';
        expect(op?.responses[status]?.content?.[contentType], `${route} ${status}`).toBeDefined();
      }
    }
  });

  it('lists every problem code', () => {
    for (const code of PROBLEM_CODES) expect(committed).toContain(`- ${code}`);
  });
});
