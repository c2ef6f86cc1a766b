import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { isSeq, parseDocument, stringify } from 'yaml';
import { hashApiKey, newApiKey, SCOPES, type Scope } from '../auth/api-keys.js';
import { NAMESPACE_PATTERN } from '../domain/namespaces.js';

/** A key id as the keys file accepts it: what log lines and the audit trail name the key by. */
const KEY_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export interface NewKeyRequest {
  readonly id: string;
  readonly namespace: string;
  readonly scopes: readonly Scope[];
}

/** A minted API key and the entry for the keys file, which holds only the key's hash. */
export interface NewKey {
  /** The key itself: shown once, to give to its owner. */
  readonly key: string;
  readonly entry: { readonly id: string; readonly hash: string; readonly namespace: string; readonly scopes: Scope[] };
}

/** Thrown for a request the keys file would refuse; the message names the option. */
export class KeyRequestError extends Error {
  override readonly name = 'KeyRequestError';
}

/** Checks a request and mints a new random API key for it. */
export function newKey(request: NewKeyRequest): NewKey {
  if (!KEY_ID_PATTERN.test(request.id)) throw new KeyRequestError('--id: 1 to 64 characters of A-Z a-z 0-9 . _ -');
  if (!NAMESPACE_PATTERN.test(request.namespace)) throw new KeyRequestError('--namespace: 1 to 64 characters of A-Z a-z 0-9 . _ -');
  if (request.scopes.length === 0) throw new KeyRequestError('--scopes: at least one of locks, admin');
  for (const scope of request.scopes) {
    if (!(SCOPES as readonly string[]).includes(scope)) throw new KeyRequestError(`--scopes: unknown scope "${scope}"`);
  }
  const key = newApiKey();
  return { key, entry: { id: request.id, hash: hashApiKey(key), namespace: request.namespace, scopes: [...request.scopes] } };
}

/** What to print for a new key: the key once, and the entry to paste under `keys:` in the keys file. */
export function describeNewKey({ key, entry }: NewKey): string {
  return (
    `API key (shown once; give it to the key's owner, store it as a secret):\n  ${key}\n\n` +
    `Add under "keys:" in the keys file (KEYHOLDER_API_KEYS_FILE), then send the server SIGHUP:\n` +
    stringify([entry]).replace(/^/gm, '  ')
  );
}

/**
 * Adds the new key's entry to the keys file `path` (its comments kept), refusing an id already there.
 * The file must be valid YAML or JSON with a `keys` list (or none yet).
 */
export function addToKeysFile(path: string, { entry }: NewKey): void {
  const doc = parseDocument(readFileSync(path, 'utf8'));
  if (doc.errors.length > 0) throw new KeyRequestError(`--file: ${path} is not valid YAML: ${doc.errors[0]?.message ?? ''}`);
  if (doc.get('keys') == null) doc.set('keys', doc.createNode([]));
  const list = doc.get('keys');
  if (!isSeq(list)) throw new KeyRequestError(`--file: "keys" in ${path} is not a list`);
  const existing = (doc.toJS() as { keys?: Array<{ id?: unknown }> | null }).keys ?? [];
  if (existing.some((k) => k.id === entry.id)) throw new KeyRequestError(`--file: ${path} already has a key with id "${entry.id}"`);
  list.flow = false;
  list.items.push(doc.createNode(entry));
  writeFileSync(path, doc.toString());
}

export const KEYS_NEW_USAGE =
  'usage: node dist/cli/keys-new.js --id <id> --namespace <namespace> --scopes <locks|admin|locks,admin> [--file <keys file>]\n' +
  '   or: npm run keys:new -- --id <id> --namespace <namespace> --scopes <...> [--file <keys file>]\n' +
  'With --file the entry is added to that keys file and only the key is printed: KEY=$(npm run -s keys:new -- ... --file deploy/api-keys.yml)';

export interface Output {
  write(text: string): unknown;
}

/**
 * The `keys new` command: parses `--id`, `--namespace` and `--scopes` (default `locks`), prints the
 * new key and its keys-file entry, or with `--file` adds the entry to that file and prints the key.
 * Returns the exit code: 0, or 2 for bad arguments (with usage).
 */
export function runKeysNew(argv: readonly string[], out: Output, err: Output): number {
  try {
    const { values } = parseArgs({
      args: [...argv],
      options: {
        id: { type: 'string' },
        namespace: { type: 'string' },
        scopes: { type: 'string', default: 'locks' },
        file: { type: 'string' },
      },
      strict: true,
    });
    const scopes = (values.scopes ?? 'locks').split(',').map((s) => s.trim()) as Scope[];
    const minted = newKey({ id: values.id ?? '', namespace: values.namespace ?? '', scopes });
    if (values.file === undefined) {
      out.write(describeNewKey(minted));
      return 0;
    }
    // Only the key on stdout, so a shell can capture it; what was done on stderr.
    addToKeysFile(values.file, minted);
    err.write(`Added key "${minted.entry.id}" to ${values.file}; a running server picks it up on SIGHUP.\n`);
    out.write(`${minted.key}\n`);
    return 0;
  } catch (e) {
    err.write(`${(e as Error).message}\n${KEYS_NEW_USAGE}\n`);
    return 2;
  }
}
