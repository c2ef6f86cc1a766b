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
