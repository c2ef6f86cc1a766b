// tsc copies no non-TS files: the Redis store's .lua scripts and the console's static files are copied next to the compiled code.
import { cpSync, mkdirSync } from 'node:fs';

mkdirSync('dist/store/redis/scripts', { recursive: true });
cpSync('src/store/redis/scripts', 'dist/store/redis/scripts', { recursive: true });
mkdirSync('dist/http/console', { recursive: true });
cpSync('src/http/console', 'dist/http/console', { recursive: true });
