import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fencedWrite, fencingMiddleware } from '../../src/fencing/index.js';

/**
 * Where the cron job writes each tick's result (`PUT /ticks/N`, last write wins), fenced or not. It
 * counts what the stalled runs' writes did: applied over a newer run's result, or refused by the fence.
 */
export interface ResultStore {
  readonly url: string;
  /** Ticks whose stored result came from a run that had stalled past its lease. */
  staleResultsApplied(): number;
  /** Writes from stalled runs that the fence refused (409). */
  staleResultsRefused(): number;
  /** Stalled runs' writes received (applied or refused). */
  staleWrites(): number;
  stop(): Promise<void>;
}

export async function startResultStore(fenced: boolean): Promise<ResultStore> {
  const results = new Map<string, { server: string; stalled: boolean }>();
  let staleRefused = 0;
  let staleWrites = 0;
  const readToken = fencingMiddleware();

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    let raw = '';
    for await (const chunk of request) raw += String(chunk);
    const result = JSON.parse(raw) as { server: string; stalled: boolean };
    const tick = request.url ?? '/';
    if (result.stalled) staleWrites++;
    const write = () => void results.set(tick, result);
    if (!fenced) {
      write();
      response.end();
      return;
    }
    const outcome = await fencedWrite(request, response, write);
    if (!outcome.committed) {
      if (result.stalled) staleRefused++;
      return;
    }
    response.end();
  };

  const server = createServer((request, response) => {
    const run = () => void handle(request, response).catch(() => response.writeHead(500).end());
    if (!fenced || request.method !== 'PUT') return run();
    readToken(request, response, run);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    staleResultsApplied: () => [...results.values()].filter((r) => r.stalled).length,
    staleResultsRefused: () => staleRefused,
    staleWrites: () => staleWrites,
    async stop() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
