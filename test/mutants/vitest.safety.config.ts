import { defineConfig } from 'vitest/config';
import base from '../../vitest.config.js';

/**
 * `npm test`'s configuration for the planted-mutant runs (test/mutants/run.ts), without its global
 * setup: that builds dist/ whenever src/ changed, so every fresh copy of the repository (and every
 * planted mutant in it) would first spend a full `tsc` build, although none of the safety test files
 * runs the compiled code.
 */
export default defineConfig({ ...base, test: { ...base.test, globalSetup: [] } });
