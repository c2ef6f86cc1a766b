import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** A free loopback TCP port (the OS picks it). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export interface RunningKeyholder {
  readonly url: string;
  readonly pid: number | undefined;
  stop(): Promise<void>;
}

/**
 * Starts a real keyholder server process from this repository on a free port (embedded store, no API
 * keys, no rate limit: the examples' buyers all come from one address) and waits until it is ready.
 */
export async function startKeyholder(env: Record<string, string> = {}): Promise<RunningKeyholder> {
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      NODE_ENV: 'development',
      LOG_LEVEL: 'warn',
      KEYHOLDER_AUTH: 'open',
      RATE_LIMIT_MAX: '0',
      ...env,
      PORT: String(port),
      HOST: '127.0.0.1',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const errors: string[] = [];
  child.stderr?.on('data', (b: Buffer) => errors.push(b.toString()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`keyholder exited with ${child.exitCode}: ${errors.join('')}`);
    const ready = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1_000) }).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ready) break;
    if (Date.now() > deadline) throw new Error(`keyholder on ${port} never became ready: ${errors.join('')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    pid: child.pid,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
