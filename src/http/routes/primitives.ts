import type { PermitKind } from '../../domain/permit-values.js';
import type { PermitPrimitive } from './permits.js';
import { RWLOCKS } from './rwlocks.js';
import { SEMAPHORES } from './semaphores.js';

/**
 * Every permit primitive's routes, one entry per kind of PERMIT_KINDS (the type makes a new kind name
 * its entry here). The app registers their routes, admin routes and OpenAPI tags from this table; the
 * history and queue routes, and the route tests, go through it too.
 */
export const PERMIT_PRIMITIVES: Readonly<Record<PermitKind, PermitPrimitive>> = {
  semaphore: SEMAPHORES,
  rwlock: RWLOCKS,
};

/** The table's entries, in its order (the order of their routes and tags in openapi.yaml). */
export const permitPrimitives = (): PermitPrimitive[] => Object.values(PERMIT_PRIMITIVES);
