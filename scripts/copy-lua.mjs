// tsc copies no non-TS files; the Redis store loads its .lua scripts next to its compiled code.
import { cpSync, mkdirSync } from 'node:fs';

mkdirSync('dist/store/redis/scripts', { recursive: true });
cpSync('src/store/redis/scripts', 'dist/store/redis/scripts', { recursive: true });
