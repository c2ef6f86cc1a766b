import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { FenceRegister, fencedWrite, fencingMiddleware } from '../../src/fencing/index.js';

/** One line of the shared log: who appended it, and in which term (its lease's fencing token). */
export interface LogEntry {
  readonly replica: string;
  /** The appending leader's fencing token; null when it holds no lock (the no-lock way). */
  readonly fencingToken: number | null;
}

export interface LogResource {
  readonly url: string;
  readonly entries: readonly LogEntry[];
  /** Appends refused for a stale fencing token (fenced only). */
  readonly rejected: readonly number[];
  stop(): Promise<void>;
}

async function bodyOf(request: IncomingMessage): Promise<string> {
  let body = '';
  for await (const chunk of request) body += String(chunk);
  return body;
}

/**
 * The resource the leader writes: an append-only log over HTTP (`POST /log`, body `{ replica }`). One
 * leader at a time must append to it, as a database's primary writes its journal. Fenced, it sits
 * behind the fencing middleware and applies each append through `fencedWrite`, so an append whose
 * token is lower than one already appended is refused (409); unfenced, it appends whatever it gets.
 */
export async function startLogResource(fenced: boolean): Promise<LogResource> {
  const entries: LogEntry[] = [];
  const rejected: number[] = [];
  const check = fencingMiddleware({
    register: new FenceRegister(),
    resourceOf: () => 'log',
    onRejected: (_r, token) => rejected.push(token),
  });
  const tokenOf = (request: IncomingMessage) => {
    const raw = request.headers['fencing-token'];
    return typeof raw === 'string' ? Number(raw) : null;
  };
  const append = async (request: IncomingMessage, response: ServerResponse) => {
    const { replica } = JSON.parse(await bodyOf(request)) as { replica: string };
    const entry = { replica, fencingToken: tokenOf(request) };
    if (!fenced) {
      entries.push(entry);
      response.end('{}');
      return;
    }
    const outcome = await fencedWrite(request, response, () => entries.push(entry));
    if (outcome.committed) response.end('{}');
  };
  const server: Server = createServer((request, response) => {
    const handle = () => void append(request, response).catch(() => response.writeHead(400).end());
    if (fenced) check(request, response, handle);
    else handle();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    entries,
    rejected,
    async stop() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * Entries appended by a leader after another leader had appended since its own last entry: the log
 * interleaves two leaders (split brain). A term is one leadership: a replica and its lease's token.
 */
export function outOfTurnEntries(entries: readonly LogEntry[]): number {
  const ended = new Set<string>();
  let current: string | undefined;
  let count = 0;
  for (const entry of entries) {
    const term = `${entry.replica}/${entry.fencingToken ?? '-'}`;
    if (term !== current) {
      if (current !== undefined) ended.add(current);
      current = term;
    }
    if (ended.has(term)) count++;
  }
  return count;
}
