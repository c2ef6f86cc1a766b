#!/usr/bin/env node
import { text } from 'node:stream/consumers';
import { EXIT, UsageError } from './args.js';
import { acquire, type Command, inspect, type Io, ls, release, renew } from './lock-commands.js';
import { runKeysNew } from './keys.js';
import { run } from './run.js';

/** `keyholder keys new ...`: the API-key command (src/cli/keys.ts), under the one `keyholder` command. */
const keys: Command = {
  summary: 'keys new: mint an API key and its keys-file entry',
  usage: `keyholder keys new --id ID --namespace NS [--scopes locks|admin|locks,admin]
Prints a new random API key (shown once) and the entry to add under "keys:" in the keys file
(KEYHOLDER_API_KEYS_FILE; the file holds only the key's hash), then send the server SIGHUP.
  --id ID          the key's name in logs and the audit trail
  --namespace NS   the namespace its locks live in
  --scopes S       locks (default), admin, or locks,admin
Exit: 0 printed, 2 bad flags.`,
  async run(args, io) {
    const [sub, ...rest] = args;
    if (sub !== 'new')
      throw new UsageError(sub === undefined ? 'which keys command? (keyholder keys new ...)' : `unknown keys command "${sub}"`);
    return runKeysNew(rest, { write: io.stdout }, { write: io.stderr });
  },
};

/** The `keyholder` command: run a command under a lock, or take, renew, release and look at locks from a shell. */
const COMMANDS: Readonly<Record<string, Command>> = { run, acquire, renew, release, inspect, ls, keys };

function overview(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((name) => name.length));
  const lines = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return `usage: keyholder <command> [flags]   (keyholder <command> --help for its flags)
${lines.join('\n')}
Environment: KEYHOLDER_URL (default http://127.0.0.1:3000), KEYHOLDER_API_KEY.
`;
}

/** --help or -h among the command's own flags (not in a `run` command's arguments after "--"). */
function wantsHelp(args: string[]): boolean {
  const end = args.indexOf('--');
  return (end < 0 ? args : args.slice(0, end)).some((a) => a === '--help' || a === '-h');
}

export async function main(argv: string[], io: Io): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    (name === undefined ? io.stderr : io.stdout)(overview());
    return name === undefined ? EXIT.usage : EXIT.ok;
  }
  const command = COMMANDS[name];
  if (command === undefined) {
    io.stderr(`keyholder: unknown command "${name}"\n${overview()}`);
    return EXIT.usage;
  }
  if (wantsHelp(args)) {
    io.stdout(`usage: ${command.usage}\n`);
    return EXIT.ok;
  }
  try {
    return await command.run(args, io);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr(`keyholder ${name}: ${err.message}\nusage: ${command.usage.split('\n')[0]}\n(keyholder ${name} --help for more)\n`);
    return EXIT.usage;
  }
}

/** Waits until a write to a pipe is flushed, so that exiting does not cut the output short. */
const flushed = (stream: NodeJS.WriteStream) => new Promise<void>((resolve) => stream.write('', () => resolve()));

const code = await main(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
  stdin: async () => (process.stdin.isTTY ? undefined : text(process.stdin)),
}).catch((err: unknown) => {
  process.stderr.write(`keyholder: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  return EXIT.failed;
});
await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
// Exit now: idle keep-alive sockets and unref'd timers must not hold the process or change its status.
process.exit(code);
