import { writeFileSync } from 'node:fs';
import { generateClientTypes } from './client-types.js';
import { writeErrorTable } from './error-docs.js';
import { generateOpenApiYaml } from './openapi.js';

// Writes the committed openapi.yaml; a test fails when it differs from what the code generates.
const yaml = await generateOpenApiYaml();
writeFileSync(new URL('../openapi.yaml', import.meta.url), yaml);
process.stdout.write('wrote openapi.yaml\n');

// And the types the client (src/client) compiles from, which a test checks against openapi.yaml the same way.
writeFileSync(new URL('../src/client/openapi-types.ts', import.meta.url), await generateClientTypes(yaml));
process.stdout.write('wrote src/client/openapi-types.ts\n');

// And docs/api.md's table of errors, from the same table of codes as the OpenAPI enum.
writeErrorTable();
process.stdout.write('wrote the table of errors in docs/api.md\n');
