import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type KeyRing, type Principal, SCOPES, type Scope } from '../auth/api-keys.js';
import { AccessLostError } from '../domain/errors.js';
import { DEFAULT_NAMESPACE } from '../domain/namespaces.js';
import { sendProblem } from './problem.js';
import { matchedRoute } from './matched-route.js';

/**
 * Who may call which route. `open`: anyone may call anything, as the shared `default` namespace (for
 * development only; the server logs a warning). `keys`: every route except the public ones needs
 * `Authorization: Bearer <key>` for a key whose scopes include the route's.
 */
export type AuthMode = { readonly mode: 'open' } | { readonly mode: 'keys'; readonly keyring: KeyRing };

export type Access = 'public' | Scope;

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * Who may call the route: `public`, or the API key scope it needs. Every route declares it (see
     * routeRule in routes/responses.ts); a route without one is refused when it is registered.
     */
    access?: Access;
  }
  interface FastifyRequest {
    /** Who is calling; set by the auth hook on every non-public route. */
    principal: Principal | null;
  }
  interface FastifyReply {
    /**
     * For a request that waits: calls `end` with the answer to give as soon as the keys in force no longer
     * let this request in as it was let in (its key removed, the route's scope or its namespace taken
     * away), at once if that is so already (a reload while its body was read). Returns the function that
     * stops watching (call it when the wait is over).
     */
    whenAccessLost(end: (answer: AccessLostError) => void): () => void;
  }
}

/**
 * The access rule of the route a request matched, as the route declared it. The interactive docs
 * page and its assets (routes @fastify/swagger-ui registers) are public like the document they show.
 * A request that matched no route is treated as `admin` here (a caller without a key learns nothing
 * about which paths exist); the key check then asks it for a valid key but no scope (404 or 405, see below).
 */
export function accessOf(request: FastifyRequest): Access {
  const route = matchedRoute(request);
  const declared = route.config.access;
  if (declared !== undefined) return declared;
  return isDocsPage(request.method, route.url) ? 'public' : 'admin';
}

function isDocsPage(method: string, url: string | undefined): boolean {
  return (method === 'GET' || method === 'HEAD') && url !== undefined && (url === '/docs' || url.startsWith('/docs/'));
}

const OPEN_PRINCIPAL: Principal = Object.freeze({
  keyId: 'anonymous',
  namespace: DEFAULT_NAMESPACE,
  scopes: new Set<Scope>(SCOPES),
  anonymous: true,
});

/** The caller of a route behind the auth hook. */
export function principalOf(request: FastifyRequest): Principal {
  if (request.principal === null) throw new Error(`no principal on ${request.method} ${request.url}: route without an access rule?`);
  return request.principal;
}

const BEARER = /^Bearer[ ]+(\S+)[ ]*$/i;

/** The answer to a key that was sent but is not valid (never why: unknown, revoked or malformed). */
const INVALID_KEY = 'the API key is not valid';
/** RFC 6750's challenge for a key that was sent but is not valid. */
export const INVALID_TOKEN_CHALLENGE = 'Bearer realm="keyholder", error="invalid_token"';

const missingScope = (access: Scope): string => `this API key does not have the "${access}" scope this route needs`;

function unauthenticated(request: FastifyRequest, reply: FastifyReply, presented: boolean): FastifyReply {
  // RFC 6750: say the scheme; for a key that was sent but is not valid, say invalid_token. Never say
  // why (unknown, revoked or malformed) so an attacker learns nothing about which keys exist.
  reply.header('www-authenticate', presented ? INVALID_TOKEN_CHALLENGE : 'Bearer realm="keyholder"');
  return sendProblem(
    request,
    reply,
    'unauthenticated',
    presented ? INVALID_KEY : 'this route needs an API key: send Authorization: Bearer <key>',
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
  // A new route is never open (or closed) by accident: it must say who may call it.
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (route.config?.access === undefined && !methods.every((m) => isDocsPage(m, route.url))) {
      throw new Error(`route ${methods.join(',')} ${route.url} declares no access rule (config.access)`);
    }
  });
  // Callback style: it runs on every request, and an async hook costs a promise each time. A refusal is
  // sent from here and `done` is then not called (Fastify's rule for answering from a callback hook).
  app.addHook('onRequest', (request, reply, done) => {
    if (!authenticate(request, reply)) done();
  });

  /** Sets request.principal, or answers the refusal; true when it answered. */
  function authenticate(request: FastifyRequest, reply: FastifyReply): boolean {
    const access = accessOf(request);
    if (access === 'public') return false;
    let principal: Principal;
    if (auth.mode === 'open') {
      principal = OPEN_PRINCIPAL;
    } else {
      const header = request.headers.authorization;
      if (header === undefined) return refused(unauthenticated(request, reply, false));
      // Node keeps the first of several Authorization headers and drops the rest; a proxy may keep the
      // last. Which key is meant is ambiguous, so neither is used.
      if (authorizationHeaders(request) > 1) {
        const message = 'must be sent once';
        return refused(
          sendProblem(request, reply, 'invalid_request', `Authorization: ${message}`, {
            errors: [{ field: 'Authorization', message }],
          }),
        );
      }
      const token = BEARER.exec(header)?.[1];
      const found = token === undefined ? null : auth.keyring.authenticate(token);
      if (found === null) return refused(unauthenticated(request, reply, true));
      principal = found;
    }
    // The request line names the key id (RequestLog reads it from here), never the key itself. Not a
    // child logger per request: creating one costs more than the rest of the hook together.
    request.principal = principal;
    // A request no route matched (404, 405) needs a valid key but no scope: its answer reveals nothing,
    // and a team's key sending the wrong method should hear 405, not 403.
    if (matchedRoute(request).url !== undefined && !principal.scopes.has(access)) {
      return refused(sendProblem(request, reply, 'forbidden', missingScope(access)));
    }
    return false;
  }

  // A wait outlives the check above by up to LOCK_MAX_WAIT_MS: each reload checks the waiting requests
  // again, so a revoked key (or one moved out of the scope or namespace) is granted nothing after it.
  const waiting = new Map<FastifyReply, (answer: AccessLostError) => void>();
  app.decorateReply('whenAccessLost', function whenAccessLost(this: FastifyReply, end: (answer: AccessLostError) => void) {
    // Open mode has no keys to reload.
    if (auth.mode === 'open') return nothing;
    const lost = accessLost(this.request);
    if (lost !== undefined) {
      end(lost);
      return nothing;
    }
    waiting.set(this, end);
    return () => waiting.delete(this);
  });
  if (auth.mode === 'keys') {
    const stop = auth.keyring.onReplace(() => {
      // A copy: an ended wait leaves the map as it answers.
      for (const [reply, end] of [...waiting]) {
        const lost = accessLost(reply.request);
        if (lost === undefined) continue;
        waiting.delete(reply);
        end(lost);
      }
    });
    app.addHook('onClose', (_app, done) => {
      stop();
      done();
    });
  }

  /**
   * Why the keys in force would not let `request` in as it was let in, or undefined when they would:
   * its key is gone (401), or no longer has the route's scope or the namespace the request acts in (403).
   */
  function accessLost(request: FastifyRequest): AccessLostError | undefined {
    const before = request.principal;
    if (auth.mode === 'open' || before === null) return undefined;
    const token = BEARER.exec(request.headers.authorization ?? '')?.[1];
    const now = token === undefined ? null : auth.keyring.authenticate(token);
    if (now === before) return undefined;
    if (now === null) return new AccessLostError('unauthenticated', INVALID_KEY);
    const access = accessOf(request);
    if (access !== 'public' && !now.scopes.has(access)) return new AccessLostError('forbidden', missingScope(access));
    if (now.namespace !== before.namespace) {
      return new AccessLostError('forbidden', `this API key no longer acts in the namespace "${before.namespace}" this request waited in`);
    }
    return undefined;
  }
}

const nothing = (): void => undefined;

/** The refusal has been sent. */
const refused = (_sent: FastifyReply): true => true;
