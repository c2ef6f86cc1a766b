import { describePermitDifferential } from './differential-permits.js';

/** Semaphores and read/write locks: the embedded store and a 3-member etcd cluster agree (differential-permits.ts). */
describePermitDifferential('etcd', 15);
