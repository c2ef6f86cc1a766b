import { z } from 'zod';
import { Namespace } from './admin.js';
import { QueuedCaller } from './locks.js';

/** The schemas of the operator's queue route (GET /v1/queue/{primitive}/{key}). */

export const AdminKeyQuery = z.strictObject({
  namespace: Namespace.meta({ description: 'The namespace of the key' }),
});

export const AdminQueue = z
  .object({
    namespace: z.string(),
    key: z.string(),
    queue: z.array(QueuedCaller).max(100).meta({ description: 'The first callers queued (at most 100), head first; empty when none' }),
  })
  .meta({ id: 'AdminQueue', description: 'Who waits for a key, in queue order. Owner tokens are never shown.' });
