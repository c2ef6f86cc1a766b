import { afterAll, beforeAll, expect } from 'vitest';
import { Redis } from 'ioredis';
import { defineScripts, type Scripts } from '../../src/store/redis/scripts.js';
import { RedisServer } from './redis-server.js';

/** A real redis-server for one file of Lua script tests: the script table on it, and a plain client to look at the state. */
export interface ScriptServer {
  readonly server: RedisServer;
  /** The script table, as the store defines it. */
  readonly scripts: Scripts;
  /** A plain client for assertions on what a script left in Redis. */
  readonly raw: Redis;
}

/** Starts the server before the file's tests and stops it after; read the fields inside tests only. */
export function useScriptServer(): ScriptServer {
  let started: { server: RedisServer; redis: Redis; scripts: Scripts; raw: Redis } | undefined;
  beforeAll(async () => {
    const server = await RedisServer.start();
    const redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
    started = { server, redis, scripts: defineScripts(redis), raw: server.client() };
  });
  afterAll(async () => {
    started?.redis.disconnect();
    started?.raw.disconnect();
    await started?.server.stop();
  });
  const get = () => {
    if (!started) throw new Error('the script server is not started yet');
    return started;
  };
  return {
    get server() {
      return get().server;
    },
    get scripts() {
      return get().scripts;
    },
    get raw() {
      return get().raw;
    },
  };
}

/** Any number, in a script reply compared with toEqual (tokens, times). */
export const int = expect.any(Number) as unknown as number;
