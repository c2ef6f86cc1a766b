import { FaultProxy, type FaultMode } from './fault-proxy.js';

/**
 * The process that runs fault proxies for a test (see fault-proxy-process.ts), driven over the IPC
 * channel: start a proxy, set or heal its fault, reset its connections, read its counters, close.
 * Every message carries an id and is answered with the same id once it has taken effect.
 */
export type HostRequest =
  | { readonly id: number; readonly op: 'start'; readonly targetPort: number }
  | { readonly id: number; readonly op: 'set'; readonly proxy: number; readonly mode: FaultMode }
  | { readonly id: number; readonly op: 'resetAll'; readonly proxy: number }
  | { readonly id: number; readonly op: 'stats'; readonly proxy: number }
  | { readonly id: number; readonly op: 'close'; readonly proxy: number };

export type HostReply = { readonly id: number; readonly result: unknown } | { readonly id: number; readonly error: string };

const proxies: FaultProxy[] = [];

function proxyAt(index: number): FaultProxy {
  const proxy = proxies[index];
  if (proxy === undefined) throw new Error(`no proxy ${index}`);
  return proxy;
}

async function handle(request: HostRequest): Promise<unknown> {
  switch (request.op) {
    case 'start': {
      const proxy = await FaultProxy.start(request.targetPort);
      proxies.push(proxy);
      return { index: proxies.length - 1, port: proxy.port };
    }
    case 'set':
      proxyAt(request.proxy).set(request.mode);
      return null;
    case 'resetAll':
      return proxyAt(request.proxy).resetAll();
    case 'stats':
      return { ...proxyAt(request.proxy).stats };
    case 'close':
      await proxyAt(request.proxy).close();
      return null;
  }
}

process.on('message', (request: HostRequest) => {
  handle(request).then(
    (result) => process.send?.({ id: request.id, result } satisfies HostReply),
    (err: unknown) => process.send?.({ id: request.id, error: String(err) } satisfies HostReply),
  );
});
// The test process went away (ended, crashed, killed): nothing is left to proxy for.
process.on('disconnect', () => process.exit(0));
process.send?.({ id: 0, result: 'ready' } satisfies HostReply);
