import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { type ApiKeyEntry, hashApiKey, KeyRing, newApiKey, type Scope } from '../../src/auth/api-keys.js';

export interface TestKey {
  readonly id: string;
  readonly namespace: string;
  readonly scopes: Scope[];
}

/** Fresh random keys for tests: the plain keys (to send) and the file entries (hashes only). */
export function makeKeys(specs: readonly TestKey[]): {
  plain: Record<string, string>;
  entries: ApiKeyEntry[];
  keyring: () => KeyRing;
  writeFile: (dir?: string) => string;
} {
  const plain: Record<string, string> = {};
  const entries = specs.map((spec) => {
    const key = newApiKey();
    plain[spec.id] = key;
    return { id: spec.id, hash: hashApiKey(key), namespace: spec.namespace, scopes: spec.scopes };
  });
  return {
    plain,
    entries,
    keyring: () => new KeyRing(entries),
    writeFile: (dir = mkdtempSync(join(tmpdir(), 'keyholder-keys-'))) => {
      const path = join(dir, 'keys.yaml');
      writeFileSync(path, stringify({ keys: entries }));
      return path;
    },
  };
}

export const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

/**
 * The usual cast of the auth tests: two teams with `locks` keys in their own namespaces and an
 * operator with an `admin` key, with the Authorization headers to send as each.
 */
export function twoTeamsAndAdmin() {
  const keys = makeKeys([
    { id: 'team-a-key', namespace: 'team-a', scopes: ['locks'] },
    { id: 'team-b-key', namespace: 'team-b', scopes: ['locks'] },
    { id: 'ops-key', namespace: 'ops', scopes: ['admin'] },
  ]);
  return {
    keys,
    A: bearer(keys.plain['team-a-key'] ?? ''),
    B: bearer(keys.plain['team-b-key'] ?? ''),
    ADMIN: bearer(keys.plain['ops-key'] ?? ''),
  };
}
