/**
 * Prints a new random API key and the entry to paste under `keys:` in the keys file. Compiled into
 * dist/, so it runs wherever the server does, the image included:
 *   node dist/cli/keys-new.js --id team-a --namespace team-a --scopes locks
 *   node dist/cli/keys-new.js --id ops --namespace ops --scopes locks,admin
 *   KEY=$(npm run -s keys:new -- --id team-a --namespace team-a --scopes locks --file deploy/api-keys.yml)
 */
import { runKeysNew } from './keys.js';

process.exitCode = runKeysNew(process.argv.slice(2), process.stdout, process.stderr);
