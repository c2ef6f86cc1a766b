import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type KeyRing, type Principal, SCOPES, type Scope } from '../auth/api-keys.js';
import { DEFAULT_NAMESPACE } from '../domain/namespaces.js';
import { sendProblem } from './problem.js';

/**
 * Who may call which route. `open`: anyone may call anything, as the shared `default` namespace (for
 * development only; the server logs a warning). `keys`: every route except the public ones needs
 * `Authorization: Bearer <key>` for a key whose scopes include the route's.
 */
export type AuthMode = { readonly mode: 'open' } | { readonly mode: 'keys'; readonly keyring: KeyRing };

export type Access = 'public' | Scope;

/**
 * The one access table, by method and route pattern. Public: the probes (load balancers and
 * orchestrators call them without credentials, and they reveal only up/ready), the API document and
 * its docs page (they describe the API, not anyone's locks) and the metrics. A route missing here needs `admin`: a new route is
 * closed until someone decides otherwise.
 */
export const ROUTE_ACCESS: Readonly<Record<string, Access>> = Object.freeze({
  'GET /livez': 'public',
  'GET /readyz': 'public',
  'GET /openapi.json': 'public',
  'GET /openapi.yaml': 'public',
  // Scraped by Prometheus without credentials; it carries counts, never keys or tokens. Keep the port
  // on a private network (see the threat table in the README).
  'GET /metrics': 'public',
  'POST /v1/locks/:key/acquire': 'locks',
  'POST /v1/locks/:key/renew': 'locks',
  'POST /v1/locks/:key/release': 'locks',
  'GET /v1/locks/:key': 'locks',
  'GET /v1/locks': 'admin',
  'DELETE /v1/locks/:key': 'admin',
});

export function accessFor(method: string, routeUrl: string | undefined): Access {
  if (routeUrl === undefined) return 'admin';
  // The interactive docs page and its assets: public like the document they show.
  if (method === 'GET' && (routeUrl === '/docs' || routeUrl.startsWith('/docs/'))) return 'public';
  // HEAD routes are Fastify's automatic twins of GET routes.
  const verb = method === 'HEAD' ? 'GET' : method;
  return ROUTE_ACCESS[`${verb} ${routeUrl}`] ?? 'admin';
}

const OPEN_PRINCIPAL: Principal = Object.freeze({
  keyId: 'anonymous',
  namespace: DEFAULT_NAMESPACE,
  scopes: new Set<Scope>(SCOPES),
  anonymous: true,
});

declare module 'fastify' {
  interface FastifyRequest {
    /** Who is calling; set by the auth hook on every non-public route. */
    principal: Principal | null;
  }
}

/** The caller of a route behind the auth hook. */
export function principalOf(request: FastifyRequest): Principal {
  if (request.principal === null) throw new Error(`no principal on ${request.method} ${request.url}: route missing from ROUTE_ACCESS?`);
  return request.principal;
}

const BEARER = /^Bearer[ ]+(\S+)[ ]*$/i;

function unauthenticated(request: FastifyRequest, reply: FastifyReply, presented: boolean): FastifyReply {
  // RFC 6750: say the scheme; for a key that was sent but is not valid, say invalid_token. Never say
  // why (unknown, revoked or malformed) so an attacker learns nothing about which keys exist.
  reply.header('www-authenticate', presented ? 'Bearer realm="keyholder", error="invalid_token"' : 'Bearer realm="keyholder"');
  return sendProblem(
    request,
    reply,
    'unauthenticated',
    presented ? 'the API key is not valid' : 'this route needs an API key: send Authorization: Bearer <key>',
  );
}

function authorizationHeaders(request: FastifyRequest): number {
  const raw = request.raw.rawHeaders;
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]?.length === 13 && raw[i]?.toLowerCase() === 'authorization') count++;
  return count;
}

/**
 * Authenticates every request before its body is read (onRequest), so unauthenticated callers cost
 * one header parse and one hash. Registered on the root instance, it runs for every route, including
 * unknown paths (a 401, not a 404, for callers without a key).
 */
export function registerAuth(app: FastifyInstance, auth: AuthMode): void {
  app.decorateRequest('principal', null);
  app.addHook('onRequest', async (request, reply) => {
    const access = accessFor(request.method, request.routeOptions.url);
    if (access === 'public') return;
    let principal: Principal;
    if (auth.mode === 'open') {
      principal = OPEN_PRINCIPAL;
    } else {
      const header = request.headers.authorization;
      if (header === undefined) return unauthenticated(request, reply, false);
      // Node keeps the first of several Authorization headers and drops the rest; a proxy may keep the
      // last. Which key is meant is ambiguous, so neither is used.
      if (authorizationHeaders(request) > 1) {
        const message = 'must be sent once';
        return sendProblem(request, reply, 'invalid_request', `Authorization: ${message}`, {
          errors: [{ field: 'Authorization', message }],
        });
      }
      const token = BEARER.exec(header)?.[1];
      const found = token === undefined ? null : auth.keyring.authenticate(token);
      if (found === null) return unauthenticated(request, reply, true);
      principal = found;
    }
    // The request line names the key id (RequestLog reads it from here), never the key itself. Not a
    // child logger per request: creating one costs more than the rest of the hook together.
    request.principal = principal;
    // A request no route matched (404, 405) needs a valid key but no scope: its answer reveals nothing,
    // and a team's key sending the wrong method should hear 405, not 403.
    if (request.routeOptions.url !== undefined && !principal.scopes.has(access)) {
      return sendProblem(request, reply, 'forbidden', `this API key does not have the "${access}" scope this route needs`);
    }
  });
}
