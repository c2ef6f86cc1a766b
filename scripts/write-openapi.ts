import { writeFileSync } from 'node:fs';
import { generateClientTypes } from './client-types.js';
import { generateOpenApiYaml } from './openapi.js';

// Writes the committed openapi.yaml; a test fails when it differs from what the code generates.
const yaml = await generateOpenApiYaml();
writeFileSync(new URL('../openapi.yaml', import.meta.url), yaml);
process.stdout.write('wrote openapi.yaml\n');

// And the typed client's types, which a test checks against openapi.yaml the same way.
writeFileSync(new URL('../test/clients/typescript/keyholder-api.d.ts', import.meta.url), await generateClientTypes(yaml));
process.stdout.write('wrote test/clients/typescript/keyholder-api.d.ts\n');
