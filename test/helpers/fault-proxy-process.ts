import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { FaultProxy, FaultMode } from './fault-proxy.js';
import type { HostReply, HostRequest } from './fault-proxy-host.js';

const HOST = fileURLToPath(new URL('./fault-proxy-host.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

type Stats = FaultProxy['stats'];
/** A request without its id (the host's message types, each less its id). */
type Ask = HostRequest extends infer R ? (R extends HostRequest ? Omit<R, 'id'> : never) : never;

/**
 * Fault proxies (FaultProxy) in a process of their own. Every byte between a keyholder instance and
 * Redis passes through its proxy; in the test's own process it waits whenever that process is busy
 * (recording a 32-client history, checking it), and on a loaded machine the waits reached 500-700 ms
 * (the driver's measured event-loop lag): replies held that long outlast the instances' 250 ms command
 * timeout, so a healthy Redis read as a failed one to all three instances at once (503s from the
 * start of a run). A process that only forwards bytes sleeps between them and is woken at once.
 */
export class FaultProxyHost {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

  private constructor(private readonly child: ChildProcess) {
    child.on('message', (reply: HostReply) => {
      const waiter = this.pending.get(reply.id);
      if (waiter === undefined) return;
      this.pending.delete(reply.id);
      if ('error' in reply) waiter.reject(new Error(reply.error));
      else waiter.resolve(reply.result);
    });
    child.once('exit', (code, signal) => {
      for (const waiter of this.pending.values()) waiter.reject(new Error(`fault proxy host exited (${code ?? signal})`));
      this.pending.clear();
    });
  }

  static async start(): Promise<FaultProxyHost> {
    const child = spawn(process.execPath, ['--import', 'tsx', HOST], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    await new Promise<void>((resolve, reject) => {
      child.once('message', () => resolve());
      child.once('exit', (code, signal) => reject(new Error(`fault proxy host exited before it was ready (${code ?? signal})`)));
    });
    return new FaultProxyHost(child);
  }

  /** A new proxy in this host in front of `targetPort`. */
  async proxy(targetPort: number): Promise<RemoteFaultProxy> {
    const { index, port } = (await this.ask({ op: 'start', targetPort })) as { index: number; port: number };
    return new RemoteFaultProxy(this, index, port);
  }

  /** Sends `request`; resolves once the host has carried it out. */
  ask(request: Ask): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ ...request, id });
    });
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.kill('SIGKILL');
    await exited;
  }
}

/**
 * One proxy of a FaultProxyHost, with FaultProxy's controls. Each resolves once the host has applied
 * it: a fault is in force from then on (a caller marking a fault window starts it after the await).
 */
export class RemoteFaultProxy {
  constructor(
    private readonly host: FaultProxyHost,
    private readonly index: number,
    readonly port: number,
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async set(mode: FaultMode): Promise<void> {
    await this.host.ask({ op: 'set', proxy: this.index, mode });
  }

  heal(): Promise<void> {
    return this.set({ kind: 'pass' });
  }

  /** Resets every open connection; how many there were. */
  async resetAll(): Promise<number> {
    return (await this.host.ask({ op: 'resetAll', proxy: this.index })) as number;
  }

  async stats(): Promise<Stats> {
    return (await this.host.ask({ op: 'stats', proxy: this.index })) as Stats;
  }

  async close(): Promise<void> {
    await this.host.ask({ op: 'close', proxy: this.index });
  }
}
