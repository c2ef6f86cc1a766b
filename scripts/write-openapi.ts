import { writeFileSync } from 'node:fs';
import { generateOpenApiYaml } from './openapi.js';

// Writes the committed openapi.yaml; a test fails when it differs from what the code generates.
writeFileSync(new URL('../openapi.yaml', import.meta.url), await generateOpenApiYaml());
process.stdout.write('wrote openapi.yaml\n');
