import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * The fencing check for a resource behind HTTP: every write carries the writer's fencing token in a
 * header, and a write whose token is lower than the highest already written to that resource is refused
 * with 409. Equal tokens pass, so one lease may write several times. Reads (GET, HEAD, OPTIONS) need no
 * token.
 *
 * The check happens when the write is applied, not when the request's headers arrive: a stale writer
 * whose body is still in flight when a newer writer's write lands must be refused, and a check made at
 * header time would have let it through already. So the middleware only reads the token; the handler
 * applies the write through `fencedWrite`, which checks the token, runs the write and records the token
 * as one step per resource.
 *
 * The register lives in memory, so it protects a resource served by this one process. A resource
 * served by several processes keeps the highest token next to its data instead (see ./sql.ts).
 */

/** The request header a writer sends its fencing token in. */
export const FENCING_TOKEN_HEADER = 'fencing-token';

export type FenceVerdict = { readonly admitted: true } | { readonly admitted: false; readonly highestSeen: number };

export type FenceCommit<T> = { readonly committed: true; readonly value: T } | { readonly committed: false; readonly highestSeen: number };

/** The highest fencing token written so far, per protected resource. */
export class FenceRegister {
  private readonly highest = new Map<string, number>();
  /** The commit running or queued last on each resource: the next one starts after it settles. */
  private readonly tails = new Map<string, Promise<unknown>>();

  /**
   * Checks and records in one synchronous step: admits `token` for `resource` unless a higher one was
   * admitted before. Right only when the caller applies its write synchronously right after; otherwise
   * use `commit`.
   */
  admit(resource: string, token: number): FenceVerdict {
    const seen = this.highest.get(resource);
    if (seen !== undefined && token < seen) return { admitted: false, highestSeen: seen };
    this.highest.set(resource, token);
    return { admitted: true };
  }

  /**
   * Runs `write` if `token` is not lower than the highest token written to `resource`, and records the
   * token once `write` has succeeded. Commits on one resource run one at a time, so no other write can
   * land between this one's check and its write, even when the write is asynchronous (a file, a
   * database). A write that throws records nothing and the error propagates.
   */
  commit<T>(resource: string, token: number, write: () => T | Promise<T>): Promise<FenceCommit<T>> {
    const run = async (): Promise<FenceCommit<T>> => {
      const seen = this.highest.get(resource);
      if (seen !== undefined && token < seen) return { committed: false, highestSeen: seen };
      const value = await write();
      this.highest.set(resource, Math.max(token, this.highest.get(resource) ?? token));
      return { committed: true, value };
    };
    const previous = this.tails.get(resource) ?? Promise.resolve();
    const result = previous.then(run, run);
    const tail = result.catch(() => undefined);
    this.tails.set(resource, tail);
    // Forget an idle resource's queue (its highest token stays): the map holds only busy resources.
    void tail.then(() => {
      if (this.tails.get(resource) === tail) this.tails.delete(resource);
    });
    return result;
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

interface FencedRequest {
  readonly resource: string;
  readonly token: number;
  readonly register: FenceRegister;
  readonly onRejected: FencingMiddlewareOptions['onRejected'];
}

/** What the middleware learned about each write request, for `fencedWrite` (gone with the request). */
const fencedRequests = new WeakMap<IncomingMessage, FencedRequest>();

/** Methods that change nothing, so they need no token (RFC 9110 safe methods; TRACE is left to the server). */
const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

function problem(response: ServerResponse, status: number, code: string, detail: string, extra: Record<string, unknown> = {}) {
  response.statusCode = status;
  response.setHeader('content-type', 'application/problem+json');
  response.end(JSON.stringify({ type: `urn:keyholder:problem:${code}`, title: detail, status, code, detail, ...extra }));
}

/**
 * Connect-style middleware `(req, res, next)` (Express, Connect, Fastify via @fastify/middie, or a
 * plain node:http handler calling it first). Reads pass. A write without a valid token gets 400; any
 * other write reaches `next()`, whose handler applies it with `fencedWrite` once its body has arrived.
 */
export function fencingMiddleware(options: FencingMiddlewareOptions = {}) {
  const register = options.register ?? new FenceRegister();
  const resourceOf = options.resourceOf ?? ((request: IncomingMessage) => (request.url ?? '/').split('?')[0] ?? '/');
  return function readFencingToken(request: IncomingMessage, response: ServerResponse, next: Next): void {
    if (READ_METHODS.has(request.method ?? 'GET')) {
      next();
      return;
    }
    const raw = request.headers[FENCING_TOKEN_HEADER];
    const token = typeof raw === 'string' && /^\d{1,16}$/.test(raw) ? Number(raw) : NaN;
    if (!Number.isSafeInteger(token)) {
      problem(response, 400, 'invalid_request', `send the lock's fencing token in the ${FENCING_TOKEN_HEADER} header`);
      return;
    }
    fencedRequests.set(request, { resource: resourceOf(request), token, register, onRejected: options.onRejected });
    next();
  };
}

/**
 * Applies a write request's write if its fencing token is still the highest for its resource, as one
 * step with the check (see `FenceRegister.commit`). Call it when the write is ready to apply (the body
 * has arrived and been validated). Refused: answers 409 `stale_fencing_token` with the highest token
 * seen and returns `{ committed: false }`; the caller sends nothing more. Committed: the caller answers.
 */
export async function fencedWrite<T>(
  request: IncomingMessage,
  response: ServerResponse,
  write: () => T | Promise<T>,
): Promise<FenceCommit<T>> {
  const fenced = fencedRequests.get(request);
  if (fenced === undefined) throw new Error('fencedWrite: the request did not pass fencingMiddleware (or is a read)');
  const outcome = await fenced.register.commit(fenced.resource, fenced.token, write);
  if (!outcome.committed) {
    fenced.onRejected?.(fenced.resource, fenced.token, outcome.highestSeen);
    problem(response, 409, 'stale_fencing_token', `fencing token ${fenced.token} is lower than ${outcome.highestSeen}, already written`, {
      highestSeen: outcome.highestSeen,
    });
  }
  return outcome;
}
