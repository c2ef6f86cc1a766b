import type { FastifyContextConfig, FastifyRequest } from 'fastify';

/** What the hooks read of the route a request matched: its path pattern and its config. */
export interface MatchedRoute {
  /** The route's path pattern; undefined when no route matched (404). */
  readonly url: string | undefined;
  readonly config: FastifyContextConfig & { readonly rateLimit?: unknown };
}

const MATCHED = Symbol('keyholder.matchedRoute');
type Marked = FastifyRequest & { [MATCHED]?: MatchedRoute };

/**
 * The route `request` matched, read once per request. Fastify's `request.routeOptions` is a getter
 * that builds a new object of a dozen fields (and asks the router about version constraints) on every
 * read, and the hooks, the rate limiter and the request log read it six or seven times per request.
 */
export function matchedRoute(request: FastifyRequest): MatchedRoute {
  const marked = request as Marked;
  let route = marked[MATCHED];
  if (route === undefined) {
    const options = request.routeOptions;
    route = { url: options.url, config: options.config };
    marked[MATCHED] = route;
  }
  return route;
}
