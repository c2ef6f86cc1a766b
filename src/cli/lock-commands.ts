import { KeyholderError, LockHeldError, NotOwnerError } from '../client/index.js';
import {
  clientFrom,
  CONNECTION_HELP,
  CONNECTION_OPTIONS,
  EXIT,
  integer,
  keyAndTtl,
  LEASE_OPTIONS,
  MAX_SERVER_WAIT_MS,
  parse,
  required,
  UsageError,
} from './args.js';

/** Where a command writes, and the environment it reads: the real process's, or a test's. */
export interface Io {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly env: NodeJS.ProcessEnv;
  /** All of standard input, or undefined when it is a terminal (nothing was piped in). */
  readonly stdin: () => Promise<string | undefined>;
}

export interface Command {
  readonly summary: string;
  readonly usage: string;
  run(args: string[], io: Io): Promise<number>;
}

const json = (value: unknown) => `${JSON.stringify(value)}\n`;

const OWNER_TOKEN_HELP = `The owner token is read from KEYHOLDER_OWNER_TOKEN, else from standard input (never a flag: an argument
shows in \`ps\` to every user of the host).`;

/** The owner token, from the environment or standard input: never from argv, which any local user can read. */
async function ownerTokenFrom(values: { 'owner-token'?: string | undefined }, io: Io): Promise<string> {
  if (values['owner-token'] !== undefined) {
    throw new UsageError('--owner-token was removed (an argument shows in `ps`): set KEYHOLDER_OWNER_TOKEN or pipe the token on stdin');
  }
  const token = io.env.KEYHOLDER_OWNER_TOKEN || (await io.stdin())?.trim();
  if (!token) throw new UsageError('no owner token: set KEYHOLDER_OWNER_TOKEN or pipe the token on stdin');
  return token;
}

/**
 * Runs a call for a shell script: its answer as one JSON line on stdout (exit 0); a problem as one JSON
 * line on stderr, exit 75 when the lock is someone else's (lock_held, not_owner) and 1 for anything else.
 */
async function answer(io: Io, call: () => Promise<unknown>): Promise<number> {
  try {
    io.stdout(json(await call()));
    return EXIT.ok;
  } catch (err) {
    if (!(err instanceof KeyholderError)) throw err;
    io.stderr(json(err.problem ?? { code: err.code, detail: err.message }));
    return err instanceof LockHeldError || err instanceof NotOwnerError ? EXIT.notAcquired : EXIT.failed;
  }
}

export const acquire: Command = {
  summary: 'take a lock once (no renewing); prints the grant with its ownerToken',
  usage: `keyholder acquire --key KEY --ttl-ms N [--wait-ms N] [--holder LABEL] [--idempotency-key K]
Takes the lock and prints the grant as JSON: {key, ownerToken, fencingToken, ttlMs, expiresAt, holder}.
Nothing renews it: renew it yourself (keyholder renew) or let it expire. For a command, use keyholder run.
  --key KEY              the lock's name
  --ttl-ms N             lease length in milliseconds
  --wait-ms N            if held, wait up to N ms in the server's fair queue (default 0: fail at once)
  --holder LABEL         a label others see (inspect, ls)
  --idempotency-key K    retrying with the same K returns the same grant while it is live${CONNECTION_HELP}
Exit: 0 acquired, 75 held by someone else, 1 any other error, 2 bad flags.`,
  async run(args, io) {
    const { values } = parse(args, {
      ...LEASE_OPTIONS,
      'wait-ms': { type: 'string' },
      holder: { type: 'string' },
      'idempotency-key': { type: 'string' },
    });
    const { key, ttlMs } = keyAndTtl(values);
    const waitMs = integer(values['wait-ms'], '--wait-ms', 0, MAX_SERVER_WAIT_MS);
    const client = clientFrom(values, io.env);
    return answer(io, () =>
      client.acquireGrant(key, {
        ttlMs,
        ...(waitMs === undefined ? {} : { waitMs }),
        ...(values.holder === undefined ? {} : { holder: values.holder }),
        ...(values['idempotency-key'] === undefined ? {} : { idempotencyKey: values['idempotency-key'] }),
      }),
    );
  },
};

export const renew: Command = {
  summary: 'extend a held lease',
  usage: `keyholder renew --key KEY --ttl-ms N   (owner token in KEYHOLDER_OWNER_TOKEN or on stdin)
Sets the lease to end N ms from now; prints {key, fencingToken, ttlMs, expiresAt}.
${OWNER_TOKEN_HELP}
  --key KEY            the lock's name
  --ttl-ms N           new lease length in milliseconds${CONNECTION_HELP}
Exit: 0 renewed, 75 this token no longer holds the lock (not_owner), 1 any other error, 2 bad flags.`,
  async run(args, io) {
    const { values } = parse(args, { ...LEASE_OPTIONS, 'owner-token': { type: 'string' } });
    const { key, ttlMs } = keyAndTtl(values);
    const client = clientFrom(values, io.env);
    const ownerToken = await ownerTokenFrom(values, io);
    return answer(io, () => client.renew(key, ownerToken, ttlMs));
  },
};

export const release: Command = {
  summary: 'give a lock back',
  usage: `keyholder release --key KEY   (owner token in KEYHOLDER_OWNER_TOKEN or on stdin)
Frees the lock if the token holds it; prints {key, released: true}.
${OWNER_TOKEN_HELP}
  --key KEY            the lock's name${CONNECTION_HELP}
Exit: 0 released, 75 this token no longer holds the lock (not_owner), 1 any other error, 2 bad flags.`,
  async run(args, io) {
    const { values } = parse(args, { ...CONNECTION_OPTIONS, key: { type: 'string' }, 'owner-token': { type: 'string' } });
    const key = required(values.key, '--key');
    const client = clientFrom(values, io.env);
    const ownerToken = await ownerTokenFrom(values, io);
    return answer(io, async () => {
      await client.release(key, ownerToken);
      return { key, released: true };
    });
  },
};

export const inspect: Command = {
  summary: 'see who holds a lock',
  usage: `keyholder inspect --key KEY
Prints {key, held, holder, fencingToken, expiresAt, ttlRemainingMs, waiters} (never the owner token).
  --key KEY        the lock's name${CONNECTION_HELP}
Exit: 0 answered (held or not), 1 error, 2 bad flags.`,
  async run(args, io) {
    const { values } = parse(args, { ...CONNECTION_OPTIONS, key: { type: 'string' } });
    const key = required(values.key, '--key');
    const client = clientFrom(values, io.env);
    return answer(io, () => client.inspect(key));
  },
};

export const ls: Command = {
  summary: 'list held locks (admin key)',
  usage: `keyholder ls [--namespace NS] [--prefix P] [--limit N] [--cursor C]
Prints one page: {locks: [...], nextCursor}. Needs an API key with the admin scope when the server checks keys.
  --namespace NS   only this namespace (all of them when absent)
  --prefix P       only keys starting with P (needs --namespace)
  --limit N        page size, 1 to 1000 (default 100)
  --cursor C       nextCursor from the previous page${CONNECTION_HELP}
Exit: 0 listed, 1 error, 2 bad flags.`,
  async run(args, io) {
    const { values } = parse(args, {
      ...CONNECTION_OPTIONS,
      namespace: { type: 'string' },
      prefix: { type: 'string' },
      limit: { type: 'string' },
      cursor: { type: 'string' },
    });
    const limit = integer(values.limit, '--limit', 1);
    const client = clientFrom(values, io.env);
    return answer(io, () =>
      client.list({
        ...(values.namespace === undefined ? {} : { namespace: values.namespace }),
        ...(values.prefix === undefined ? {} : { prefix: values.prefix }),
        ...(limit === undefined ? {} : { limit }),
        ...(values.cursor === undefined ? {} : { cursor: values.cursor }),
      }),
    );
  },
};
