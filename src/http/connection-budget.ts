import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { OverloadedError } from '../domain/errors.js';
import { matchedRoute } from './matched-route.js';

/**
 * 256 file descriptors kept back from the connection budget when it is derived from the open-file
 * limit: the store's connections (a Redis Cluster or Sentinel set is dozens), the log, the API keys
 * file, DNS. Out of descriptors, the process can neither reconnect to its store nor accept a probe.
 */
export const RESERVED_FILE_DESCRIPTORS = 256;

/**
 * 64 connections past the budget are still accepted, to answer probes and the metrics scrape (and
 * refuse everything else with 503 overloaded at once); past those, Node closes new connections
 * unanswered (server.maxConnections).
 */
export const PROBE_CONNECTIONS = 64;

/** 20,000: the budget where the open-file limit cannot be read (not Linux): twice the default waiting room. */
const BUDGET_WITHOUT_FILE_LIMIT = 20_000;

/** Routes answered on a connection past the budget: an instance full of connections is still seen alive and measured. */
const PROBES = new Set(['/livez', '/readyz', '/metrics']);

/** 1 s: the retry goes to another instance, or finds a connection freed (idle ones close after the keep-alive timeout). */
const RETRY_AFTER_MS = 1000;

/** The soft limit on open files of this process (Linux /proc), or undefined where it cannot be read or is unlimited. */
export function openFileLimit(limitsFile = '/proc/self/limits'): number | undefined {
  try {
    const line = readFileSync(limitsFile, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = Number(line?.split(/\s{2,}/)[1]);
    return Number.isFinite(soft) && soft > 0 ? soft : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The connections one instance keeps open at once: the configured number, or what the open-file
 * limit leaves after the reserved descriptors and the probes' connections (at least 1).
 */
export function connectionBudget(configured: number | undefined, fileLimit: number | undefined = openFileLimit()): number {
  if (configured !== undefined) return configured;
  if (fileLimit === undefined) return BUDGET_WITHOUT_FILE_LIMIT;
  return Math.max(1, fileLimit - RESERVED_FILE_DESCRIPTORS - PROBE_CONNECTIONS);
}

/**
 * Caps the connections the server keeps open at `maxConnections`. A connection accepted past it is
 * answered, not dropped, and closed after its answer: its requests get 503 `overloaded` (budget
 * `connections`) before any other work, except the probes, the metrics scrape, renewals and releases,
 * which are served; past
 * PROBE_CONNECTIONS more, Node closes new connections at once. So a tenant opening thousands of
 * sockets never runs the process out of file descriptors (its store connection and the probes keep
 * working), and the sockets one tenant can keep open for long are bounded by its waiter cap (an open
 * wait holds one) and the timeouts (idle and half-sent ones are closed after seconds).
 */
export function registerConnectionBudget(app: FastifyInstance, maxConnections: number, onShed?: () => void): void {
  const server = app.server;
  server.maxConnections = maxConnections + PROBE_CONNECTIONS;
  let open = 0;
  const pastBudget = new WeakSet<Socket>();
  server.on('connection', (socket: Socket) => {
    open++;
    if (open > maxConnections) pastBudget.add(socket);
    socket.once('close', () => open--);
  });
  // Callback style: it runs on every request, and an async hook costs a promise each time.
  app.addHook('onRequest', (request, reply, done) => {
    if (!pastBudget.has(request.raw.socket)) {
      done();
      return;
    }
    // The connection is what is over budget: it closes after this answer, and the next request opens a new one.
    reply.header('connection', 'close');
    const url = matchedRoute(request).url ?? '';
    // A renewal or release refused here could cost its caller the lease: they are served, like the probes.
    if (PROBES.has(url) || url.endsWith('/renew') || url.endsWith('/release')) {
      done();
      return;
    }
    onShed?.();
    done(new OverloadedError('connections', RETRY_AFTER_MS));
  });
}
