import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import { hashApiKey, newApiKey, SCOPES, type Scope } from '../src/auth/api-keys.js';
import { NAMESPACE_PATTERN } from '../src/domain/namespaces.js';

/**
 * Prints a new random API key (give it to the team, once) and the entry to paste under `keys:` in the
 * keys file (it holds only the key's hash). Usage:
 *   npm run keys:new -- --id team-a --namespace team-a --scopes locks
 *   npm run keys:new -- --id ops --namespace ops --scopes locks,admin
 */
const USAGE = 'usage: npm run keys:new -- --id <id> --namespace <namespace> --scopes <locks|admin|locks,admin>';

function fail(message: string): never {
  process.stderr.write(`${message}\n${USAGE}\n`);
  process.exit(2);
}

let values: { id?: string; namespace?: string; scopes?: string };
try {
  ({ values } = parseArgs({
    options: { id: { type: 'string' }, namespace: { type: 'string' }, scopes: { type: 'string', default: 'locks' } },
    strict: true,
  }));
} catch (err) {
  fail((err as Error).message);
}
const { id, namespace, scopes: scopeList = 'locks' } = values;
if (!id || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(id)) fail('--id: 1 to 64 characters of A-Z a-z 0-9 . _ -');
if (!namespace || !NAMESPACE_PATTERN.test(namespace)) fail('--namespace: 1 to 64 characters of A-Z a-z 0-9 . _ -');
const scopes = scopeList.split(',').map((s) => s.trim());
for (const scope of scopes) if (!(SCOPES as readonly string[]).includes(scope)) fail(`--scopes: unknown scope "${scope}"`);

const key = newApiKey();
const entry = { id, hash: hashApiKey(key), namespace, scopes: scopes as Scope[] };
process.stdout.write(
  `API key (shown once; give it to the key's owner, store it as a secret):\n  ${key}\n\n` +
    `Add under "keys:" in the keys file (KEYHOLDER_API_KEYS_FILE), then send the server SIGHUP:\n` +
    stringify([entry]).replace(/^/gm, '  '),
);
