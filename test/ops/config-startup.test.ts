import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { freePort, RedisServer } from '../helpers/redis-server.js';

/**
 * Start-up of the compiled server (node dist/server.js): a bad value stops it with one line naming the
 * variable and a non-zero exit code, never a stack trace, and is never silently ignored.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
let redis: RedisServer;
const children: Array<ReturnType<typeof spawn>> = [];

beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await redis?.stop();
});

interface Run {
  /** The exit code, or 'running' when the process was still up after `forMs`. */
  readonly exit: number | string;
  readonly output: string;
  readonly port: number;
  stop(): void;
}

/** Runs the server with `env` (and a free PORT unless given) for up to `forMs`, or until it exits. */
async function run(env: Record<string, string>, forMs = 8_000): Promise<Run> {
  const port = env.PORT !== undefined ? Number(env.PORT) : await freePort();
  const child = spawn(process.execPath, ['dist/server.js'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', WARM_UP_CYCLES: '0', HOST: '127.0.0.1', PORT: String(port), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const exit = await new Promise<number | string>((resolve) => {
    const timer = setTimeout(() => resolve('running'), forMs);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve(code ?? String(signal));
    });
  });
  return { exit, output, port, stop: () => child.kill('SIGKILL') };
}

function expectOneClearError(result: Run, variable: string) {
  expect(result.exit, result.output).not.toBe('running');
  expect(result.exit, result.output).not.toBe(0);
  expect(result.output).toMatch(new RegExp(`keyholder: (invalid configuration:\\n\\s+)?${variable}\\b`));
  // No stack trace: no "    at fn (file:line:col)" frames, no Node crash banner.
  expect(result.output).not.toMatch(/^\s+at .+:\d+:\d+\)?$/m);
  expect(result.output).not.toContain('Node.js v');
}

describe('start-up refusals of node dist/server.js', () => {
  it('HOST that does not resolve: one line naming HOST, exit non-zero, no stack trace', async () => {
    expectOneClearError(await run({ HOST: 'no-such-host.invalid' }), 'HOST');
  });

  it('PORT already taken: one line naming PORT, exit non-zero, no stack trace', async () => {
    const port = await freePort();
    const squatter: Server = createServer();
    await new Promise<void>((resolve) => squatter.listen(port, '127.0.0.1', resolve));
    try {
      expectOneClearError(await run({ PORT: String(port) }), 'PORT');
    } finally {
      squatter.close();
    }
  });

  it('REDIS_URL whose database is not a number: refused naming REDIS_URL, no crash with a stack trace', async () => {
    expectOneClearError(await run({ REDIS_URL: `${redis.url}/abc` }), 'REDIS_URL');
  });

  it('REDIS_URL naming a database this Redis does not have: never silently served from database 0', async () => {
    const admin = redis.client();
    try {
      await admin.flushall();
      // Redis refuses the SELECT, and the process stops at once with one line naming REDIS_URL. Waited on
      // until it exits (the bound only ends a run that hangs): at 3 s a busy machine sometimes still had it
      // starting, and the probe of a process that was exiting failed.
      const result = await run({ REDIS_URL: `${redis.url}/99` }, 30_000);
      expectOneClearError(result, 'REDIS_URL');
      expect(await admin.keys('*db99*')).toEqual([]);
    } finally {
      admin.disconnect();
    }
  });
});

describe('settings that would be silently ignored are refused', () => {
  const cases: Array<[string, Record<string, string>, string]> = [
    [
      'REDIS_SENTINEL_NAME without REDIS_SENTINELS (with REDIS_URL)',
      { REDIS_URL: 'redis://r:26379', REDIS_SENTINEL_NAME: 'mymaster' },
      'REDIS_SENTINEL_NAME',
    ],
    ['REDIS_SENTINEL_NAME with no Redis at all', { REDIS_SENTINEL_NAME: 'mymaster' }, 'REDIS_SENTINEL_NAME'],
    ['REDIS_MIN_REPLICA_ACKS on the embedded store', { KEYHOLDER_STORE: 'memory', REDIS_MIN_REPLICA_ACKS: '1' }, 'REDIS_MIN_REPLICA_ACKS'],
    [
      'REDIS_MIN_REPLICA_ACKS on etcd',
      { KEYHOLDER_STORE: 'etcd', ETCD_ENDPOINTS: 'http://e1:2379', REDIS_MIN_REPLICA_ACKS: '1' },
      'REDIS_MIN_REPLICA_ACKS',
    ],
  ];
  for (const [name, env, variable] of cases) {
    it(`${name}: refused, naming ${variable}`, () => {
      expect(() => loadConfig(env)).toThrow(ConfigError);
      expect(() => loadConfig(env)).toThrow(new RegExp(`\\b${variable}\\b`));
    });
  }

  it('the same settings where they apply still load', () => {
    expect(loadConfig({ REDIS_SENTINELS: 's1:26379', REDIS_SENTINEL_NAME: 'mymaster', REDIS_MIN_REPLICA_ACKS: '1' }).store.kind).toBe(
      'redis',
    );
    expect(loadConfig({ REDIS_URL: 'redis://r:6379/3', REDIS_MIN_REPLICA_ACKS: '1' }).store.kind).toBe('redis');
  });
});

describe('secrets never printed in configuration errors', () => {
  const cases: Array<[string, Record<string, string>, string]> = [
    ['a Redis URL with a password in REDIS_CLUSTER_NODES', { REDIS_CLUSTER_NODES: 'redis://:hunter2@n1:7000' }, 'REDIS_CLUSTER_NODES'],
    ['user:password@ in REDIS_SENTINELS', { REDIS_SENTINELS: 'default:hunter2@s1:26379', REDIS_SENTINEL_NAME: 'm' }, 'REDIS_SENTINELS'],
    [
      'credentials in an ETCD_ENDPOINTS URL',
      { KEYHOLDER_STORE: 'etcd', ETCD_ENDPOINTS: 'https://root:hunter2@e1:2379/v3' },
      'ETCD_ENDPOINTS',
    ],
    ['a bad REDIS_URL with a password', { REDIS_URL: 'redis://:hunter2@host:abc' }, 'REDIS_URL'],
    ['a REDIS_URL with a password and a bad database', { REDIS_URL: 'redis://:hunter2@host:6379/x' }, 'REDIS_URL'],
  ];
  for (const [name, env, variable] of cases) {
    it(`${name}: the error names ${variable}, never the password`, () => {
      let message = '';
      try {
        loadConfig(env);
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        message = (err as Error).message;
      }
      expect(message).toMatch(new RegExp(`\\b${variable}\\b`));
      expect(message).not.toContain('hunter2');
    });
  }
});

describe('OTEL_TRACES_EXPORTER', () => {
  it('a name the SDK does not know is refused, not tracing turned off in silence', () => {
    expect(() => loadConfig({ OTEL_TRACES_EXPORTER: 'otpl' })).toThrow(/OTEL_TRACES_EXPORTER/);
  });
  it('the names it knows still load', () => {
    expect(loadConfig({ OTEL_TRACES_EXPORTER: 'otlp' }).tracing).toBe(true);
    expect(loadConfig({ OTEL_TRACES_EXPORTER: 'otlp, console' }).tracing).toBe(true);
    expect(loadConfig({ OTEL_TRACES_EXPORTER: 'none' }).tracing).toBe(false);
  });
});
