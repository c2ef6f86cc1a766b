import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { isSeq, parseDocument, stringify } from 'yaml';
import { hashApiKey, newApiKey, SCOPES, type Scope } from '../src/auth/api-keys.js';
import { NAMESPACE_PATTERN } from '../src/domain/namespaces.js';

/**
 * Prints a new random API key (give it to the team, once) and the entry to paste under `keys:` in the
 * keys file (it holds only the key's hash). Usage:
 *   npm run keys:new -- --id team-a --namespace team-a --scopes locks
 *   npm run keys:new -- --id ops --namespace ops --scopes locks,admin
 * With --file, the entry is added to that keys file (comments kept) and only the key is printed, so a
 * shell can capture it:
 *   KEY=$(npm run -s keys:new -- --id team-a --namespace team-a --scopes locks --file deploy/api-keys.yml)
 */
const USAGE =
  'usage: npm run keys:new -- --id <id> --namespace <namespace> --scopes <locks|admin|locks,admin> [--file <keys file>]';

function fail(message: string): never {
  process.stderr.write(`${message}\n${USAGE}\n`);
  process.exit(2);
}

let values: { id?: string; namespace?: string; scopes?: string; file?: string };
try {
  ({ values } = parseArgs({
    options: {
      id: { type: 'string' },
      namespace: { type: 'string' },
      scopes: { type: 'string', default: 'locks' },
      file: { type: 'string' },
    },
    strict: true,
  }));
} catch (err) {
  fail((err as Error).message);
}
const { id, namespace, scopes: scopeList = 'locks', file } = values;
if (!id || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(id)) fail('--id: 1 to 64 characters of A-Z a-z 0-9 . _ -');
if (!namespace || !NAMESPACE_PATTERN.test(namespace)) fail('--namespace: 1 to 64 characters of A-Z a-z 0-9 . _ -');
const scopes = scopeList.split(',').map((s) => s.trim());
for (const scope of scopes) if (!(SCOPES as readonly string[]).includes(scope)) fail(`--scopes: unknown scope "${scope}"`);

const key = newApiKey();
const entry = { id, hash: hashApiKey(key), namespace, scopes: scopes as Scope[] };
if (file !== undefined) {
  let doc;
  try {
    doc = parseDocument(readFileSync(file, 'utf8'));
  } catch (err) {
    fail(`--file: ${(err as Error).message}`);
  }
  if (doc.errors.length > 0) fail(`--file: ${file} is not valid YAML: ${doc.errors[0]?.message ?? ''}`);
  let list = doc.get('keys');
  if (list === undefined || list === null) {
    doc.set('keys', doc.createNode([]));
    list = doc.get('keys');
  }
  if (!isSeq(list)) fail(`--file: "keys" in ${file} is not a list`);
  const existing = (doc.toJS() as { keys?: Array<{ id?: unknown }> | null }).keys ?? [];
  if (existing.some((k) => k.id === id)) fail(`--file: ${file} already has a key with id "${id}"`);
  list.flow = false;
  list.items.push(doc.createNode(entry));
  writeFileSync(file, doc.toString());
  process.stderr.write(`Added key "${id}" (namespace ${namespace}, scopes ${scopes.join(',')}) to ${file}; a running server picks it up on SIGHUP.\n`);
  process.stdout.write(`${key}\n`);
  process.exit(0);
}

process.stdout.write(
  `API key (shown once; give it to the key's owner, store it as a secret):\n  ${key}\n\n` +
    `Add under "keys:" in the keys file (KEYHOLDER_API_KEYS_FILE), then send the server SIGHUP:\n` +
    stringify([entry]).replace(/^/gm, '  '),
);
