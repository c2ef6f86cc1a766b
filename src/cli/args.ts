import { parseArgs, type ParseArgsConfig } from 'node:util';
import { KeyholderClient } from '../client/index.js';

/** Exit codes shared by the commands (sysexits.h where one fits). */
export const EXIT = Object.freeze({
  ok: 0,
  /** Anything else went wrong: the server refused, could not be reached, or answered an error. */
  failed: 1,
  /** A flag is missing or malformed; the message names it. */
  usage: 2,
  /** EX_TEMPFAIL: the lock is someone else's (held, or --wait-ms ran out; not_owner for renew/release). */
  notAcquired: 75,
  /** The lease was lost while `run`'s command ran, and the command was stopped. */
  leaseLost: 76,
});

/** A usage error: printed with the command's usage line, exit 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** The options every command that talks to the server takes. */
export const CONNECTION_OPTIONS = {
  url: { type: 'string' },
  'retry-ms': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies NonNullable<ParseArgsConfig['options']>;

/** The connection flags, the lock's key and a lease length: what every command that takes or renews a lease reads. */
export const LEASE_OPTIONS = {
  ...CONNECTION_OPTIONS,
  key: { type: 'string' },
  'ttl-ms': { type: 'string' },
} as const satisfies NonNullable<ParseArgsConfig['options']>;

/** `--key` and `--ttl-ms`, both required. */
export function keyAndTtl(values: { key?: string | undefined; 'ttl-ms'?: string | undefined }): { key: string; ttlMs: number } {
  return { key: required(values.key, '--key'), ttlMs: integer(required(values['ttl-ms'], '--ttl-ms'), '--ttl-ms', 1) ?? 0 };
}

export const CONNECTION_HELP = `
  --url URL        server (default: $KEYHOLDER_URL, else http://127.0.0.1:3000)
  --retry-ms N     keep retrying 503, 429, 408 and lost connections for up to N ms (default 15000)
  -h, --help       this help
Environment: KEYHOLDER_URL, KEYHOLDER_API_KEY (sent as a bearer token).`;

/** parseArgs with strict checking; its own messages already name the flag ("Unknown option '--tll-ms'"). */
export function parse<O extends NonNullable<ParseArgsConfig['options']>>(
  args: string[],
  options: O,
): ReturnType<typeof parseArgs<{ args: string[]; options: O; strict: true }>> {
  try {
    return parseArgs({ args, options, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** A required string flag. */
export function required(value: string | undefined, flag: string): string {
  if (value === undefined || value === '') throw new UsageError(`${flag} is required`);
  return value;
}

/** A whole number of milliseconds (or a count), with the flag named when it is not one (or above `max`). */
export function integer(value: string | undefined, flag: string, min: number, max?: number): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) || Number(value) < min || !Number.isSafeInteger(Number(value))) {
    throw new UsageError(`${flag} must be a whole number >= ${min} (got "${value}")`);
  }
  if (max !== undefined && Number(value) > max) throw new UsageError(`${flag} must be at most ${max} (got "${value}")`);
  return Number(value);
}

/** The longest wait one acquire can ask for: LOCK_MAX_WAIT_MS is at most this (docs/configuration.md). */
export const MAX_SERVER_WAIT_MS = 600_000;

/** The client for the connection flags (--url, --retry-ms) and the environment. */
export function clientFrom(values: { url?: string; 'retry-ms'?: string }, env: NodeJS.ProcessEnv): KeyholderClient {
  const baseUrl = values.url ?? env.KEYHOLDER_URL ?? 'http://127.0.0.1:3000';
  if (!/^https?:\/\/[^\s]+$/.test(baseUrl) || !URL.canParse(baseUrl)) {
    throw new UsageError(`--url / KEYHOLDER_URL must be an http(s) URL (got "${baseUrl}")`);
  }
  const retryBudgetMs = integer(values['retry-ms'], '--retry-ms', 0);
  return new KeyholderClient({
    baseUrl,
    apiKey: env.KEYHOLDER_API_KEY || undefined,
    ...(retryBudgetMs === undefined ? {} : { retryBudgetMs }),
  });
}
