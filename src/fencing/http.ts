import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * The fencing check for a resource behind HTTP: every write carries the writer's fencing token in a
 * header, and a token lower than the highest already accepted for that resource is refused with 409.
 * Equal tokens pass, so one lease may write several times.
 *
 * The register lives in memory, so it protects a resource served by this one process. A resource
 * served by several processes keeps the highest token next to its data instead (see ./sql.ts).
 */

/** The request header a writer sends its fencing token in. */
export const FENCING_TOKEN_HEADER = 'fencing-token';

export type FenceVerdict = { readonly admitted: true } | { readonly admitted: false; readonly highestSeen: number };

/** The highest fencing token admitted so far, per protected resource. */
export class FenceRegister {
  private readonly highest = new Map<string, number>();

  /** Admits `token` for `resource` unless a higher one was admitted before; remembers the highest. */
  admit(resource: string, token: number): FenceVerdict {
    const seen = this.highest.get(resource);
    if (seen !== undefined && token < seen) return { admitted: false, highestSeen: seen };
    this.highest.set(resource, token);
    return { admitted: true };
  }

  highestSeen(resource: string): number | undefined {
    return this.highest.get(resource);
  }
}

export interface FencingMiddlewareOptions {
  /** Which resource a request writes (default: its path without the query string). */
  readonly resourceOf?: (request: IncomingMessage) => string;
  /** Shared with other code that must see the same highest tokens (default: a new one). */
  readonly register?: FenceRegister;
  /** Called for each refused write, e.g. to count them. */
  readonly onRejected?: (resource: string, token: number, highestSeen: number) => void;
}

type Next = (err?: unknown) => void;

function problem(response: ServerResponse, status: number, code: string, detail: string, extra: Record<string, unknown> = {}) {
  response.statusCode = status;
  response.setHeader('content-type', 'application/problem+json');
  response.end(JSON.stringify({ type: `urn:keyholder:problem:${code}`, title: detail, status, code, detail, ...extra }));
}

/**
 * Connect-style middleware `(req, res, next)` (Express, Connect, Fastify via @fastify/middie, or a
 * plain node:http handler calling it first). A write without a valid token gets 400; a stale token
 * gets 409 `stale_fencing_token` with the highest token seen; the rest reach `next()`.
 */
export function fencingMiddleware(options: FencingMiddlewareOptions = {}) {
  const register = options.register ?? new FenceRegister();
  const resourceOf = options.resourceOf ?? ((request: IncomingMessage) => (request.url ?? '/').split('?')[0] ?? '/');
  return function checkFencingToken(request: IncomingMessage, response: ServerResponse, next: Next): void {
    const raw = request.headers[FENCING_TOKEN_HEADER];
    const token = typeof raw === 'string' && /^\d{1,16}$/.test(raw) ? Number(raw) : NaN;
    if (!Number.isSafeInteger(token)) {
      problem(response, 400, 'invalid_request', `send the lock's fencing token in the ${FENCING_TOKEN_HEADER} header`);
      return;
    }
    const resource = resourceOf(request);
    const verdict = register.admit(resource, token);
    if (!verdict.admitted) {
      options.onRejected?.(resource, token, verdict.highestSeen);
      problem(response, 409, 'stale_fencing_token', `fencing token ${token} is lower than ${verdict.highestSeen}, already seen`, {
        highestSeen: verdict.highestSeen,
      });
      return;
    }
    next();
  };
}
