import { buildApp } from '../src/app.js';
import { openApiYaml } from '../src/http/openapi.js';
import { DEFAULT_LIMITS } from '../src/config.js';
import { LockService } from '../src/domain/lock-service.js';
import { createLogger } from '../src/observability/logger.js';
import { MemoryStore } from '../src/store/memory/memory-store.js';

/** The OpenAPI document as the route schemas generate it (YAML), built from an app that never listens. */
export async function generateOpenApiYaml(): Promise<string> {
  const store = new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 });
  const app = await buildApp({ locks: new LockService(store, DEFAULT_LIMITS), store, logger: createLogger('silent') });
  try {
    await app.ready();
    return openApiYaml(app.swagger());
  } finally {
    await app.close();
    await store.close();
  }
}
