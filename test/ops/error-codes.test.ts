import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ERROR_CODES, PROBLEM_CODES, sentCodeOf, type ErrorCode, type ProblemCode } from '../../src/domain/error-codes.js';
import { errorFromResponse, type ProblemCode as ClientProblemCode } from '../../src/client/errors.js';
import { requireTool } from '../helpers/tools.js';

/**
 * The table of codes (src/domain/error-codes.ts) is the one list; every other list is derived from it
 * (the OpenAPI enum, the TypeScript client's types) or checked against it here, so a code added to or
 * changed in the table shows up in every list or fails this file.
 */
const root = new URL('../../', import.meta.url).pathname;
const read = (path: string): string => readFileSync(root + path, 'utf8');
const codes = Object.keys(ERROR_CODES) as ErrorCode[];

// The TypeScript client's codes are generated from openapi.yaml: the same set as the table's sent codes,
// or this file does not compile (tsc --noEmit, in npm run lint).
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const clientCodesMatch: Same<ClientProblemCode, ProblemCode> = true;

/**
 * The statuses every client retries (with the code `unreachable`, a call that got no answer): the
 * server's retryable ones, and a load balancer's 502 and 504 (no code of the server's has them).
 */
const RETRIED_STATUSES = [408, 429, 502, 503, 504];

describe('the table of error codes', () => {
  it('sends each code as itself or as a sent code with the same status', () => {
    expect(clientCodesMatch).toBe(true);
    for (const code of codes) {
      const sent = sentCodeOf(code);
      expect(PROBLEM_CODES, code).toContain(sent);
      expect(ERROR_CODES[sent].status, code).toBe(ERROR_CODES[code].status);
    }
  });

  it('is the OpenAPI enum of Problem.code, in order (npm run openapi)', () => {
    const doc = parse(read('openapi.yaml')) as { components: { schemas: { Problem: { properties: { code: { enum: string[] } } } } } };
    expect(doc.components.schemas.Problem.properties.code.enum).toEqual([...PROBLEM_CODES]);
  });

  it('says retryable exactly where the clients retry (408, 429, 503; 502 and 504 are never sent)', () => {
    for (const code of codes) expect(ERROR_CODES[code].retryable, code).toBe(RETRIED_STATUSES.includes(ERROR_CODES[code].status));
  });

  it('agrees with the TypeScript client on every sent code', () => {
    for (const code of PROBLEM_CODES) {
      const { status, title, retryable } = ERROR_CODES[code];
      const body = { type: `urn:keyholder:problem:${code}`, title, status, detail: 'x', code };
      const err = errorFromResponse(new Response(null, { status }), body);
      expect(err.code, code).toBe(code);
      expect(err.retryable, code).toBe(retryable);
    }
  });

  it('agrees with the Python client: every code it maps exists, and it retries the retryable ones', () => {
    requireTool('python3', 'python3');
    const script = [
      'import json, sys',
      "sys.path.insert(0, 'clients/python')",
      'import keyholder as k',
      'rows = json.loads(sys.argv[1])',
      "print(json.dumps({'mapped': sorted(k._ERRORS), 'retryable': {c: k.KeyholderError('', c, s).retryable for c, s in rows.items()}}))",
    ].join('\n');
    const rows = Object.fromEntries(PROBLEM_CODES.map((code) => [code, ERROR_CODES[code].status]));
    const out = JSON.parse(execFileSync('python3', ['-I', '-c', script, JSON.stringify(rows)], { cwd: root, encoding: 'utf8' })) as {
      mapped: string[];
      retryable: Record<string, boolean>;
    };
    for (const code of out.mapped) expect(PROBLEM_CODES, `clients/python maps unknown code ${code}`).toContain(code);
    for (const code of PROBLEM_CODES) expect(out.retryable[code], code).toBe(ERROR_CODES[code].retryable);
  });

  it('agrees with the Go client: every code its sentinels map exists, and it retries by the same statuses', () => {
    const source = read('clients/go/errors.go');
    const map = /var sentinelOf = map\[string\]error\{([^}]*)\}/.exec(source)?.[1] ?? '';
    const mapped = [...map.matchAll(/^\s*"([a-z_]+)":/gm)].map((m) => m[1]);
    expect(mapped.length).toBeGreaterThan(10);
    for (const code of mapped) expect(PROBLEM_CODES, `clients/go maps unknown code ${code}`).toContain(code);
    const retryable = /func \(e \*Error\) Retryable\(\) bool \{([^}]*)\}/.exec(source)?.[1] ?? '';
    const statuses = {
      StatusRequestTimeout: 408,
      StatusTooManyRequests: 429,
      StatusBadGateway: 502,
      StatusServiceUnavailable: 503,
      StatusGatewayTimeout: 504,
    } as const;
    const retried = [...retryable.matchAll(/http\.(Status\w+)/g)].map((m) => statuses[m[1] as keyof typeof statuses]);
    expect(retried.sort()).toEqual(RETRIED_STATUSES);
  });
});
