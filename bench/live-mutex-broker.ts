import { Broker } from 'live-mutex';

/**
 * The live-mutex peer: its TCP broker (a Node process holding every lock in memory) in a process of
 * its own, as the library's docs run it, so its CPU is measured apart from the clients'. No auth, no
 * persistence, no fencing token; waiting callers queue in the broker.
 */

const broker = new Broker({ host: '127.0.0.1', port: Number(process.env.PORT), noDelay: true });
// Without a listener the library prints its warnings (one per client that goes away) to stderr.
broker.emitter.on('warning', () => undefined);
await broker.ensure();
process.stdout.write('live-mutex broker ready\n');
const close = () => process.exit(0);
process.on('SIGTERM', close);
process.on('SIGINT', close);
