import { describePermitDifferential } from './differential-permits.js';

/** Semaphores and read/write locks: the embedded store and Redis agree (differential-permits.ts). */
describePermitDifferential('redis', 15);
